"""Heads behind a prediction: a clean and a corrupted text, each head's direct logit attribution on
the clean run and the fraction of the logit difference its clean output restores in the corrupted
run (`mha_viz.attribution`), with the presets the page offers and the table it downloads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_viz_models import LoadedModel

from . import attribution
from .capture import AttentionRun, analyze
from .tokenize import InputError, tokenize


@dataclass(frozen=True)
class Preset:
    name: str
    clean: str
    corrupted: str
    about: str  # what the pair tests, for the page's caption


IOI = Preset("Indirect object (names swapped)",
             "When Mary and John went to the store, John gave a drink to",
             "When Mary and John went to the store, Mary gave a drink to",
             "Wang et al. 2022: the model should name the person who is not the subject of the second clause. "
             "Swapping the second name swaps the answer.")
FACTUAL = Preset("Factual recall (landmark swapped)",
                 "The Eiffel Tower is located in the city of",
                 "The Colosseum is located in the city of",
                 "Meng et al. 2022: the city is recalled from the landmark; the other landmark names another city.")
INDUCTION = Preset("Induction (repeated sequence, first half changed)",
                   "q w e r t y u i o q w e r t y u i",
                   "a s d f g h j k l q w e r t y u i",
                   "Olsson et al. 2022: the second half repeats the first, so the next token is copied from "
                   "after the earlier 'i'; with the first half changed there is nothing to copy.")


def presets(model: LoadedModel) -> list[Preset]:
    """The presets that fit `model`: the induction pair for the letter-level toy model, else the
    natural-language ones (IOI, factual recall)."""
    if model.name == "toy-induction":
        return [INDUCTION]
    return [IOI, FACTUAL]


@dataclass
class Explanation:
    """What the page shows for one clean / corrupted pair."""

    dla: attribution.DirectLogit  # on the clean run: answer − wrong
    patching: attribution.Patching  # denoising: the restored fraction per head
    clean: AttentionRun  # both runs, with value norms (the one-head panel)
    corrupted: AttentionRun
    answer_text: str
    wrong_text: str

    def table(self) -> pd.DataFrame:
        """One row a head: layer, head, direct logit attribution, restored fraction."""
        L, H = self.dla.per_head.shape
        layers, heads = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
        return pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(),
                             "direct_logit_attribution": self.dla.per_head.ravel().astype(float),
                             "restored_fraction": self.patching.restored.ravel().astype(float)})


def explain(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None, *,
            max_tokens: int | None = None, progress=None) -> Explanation:
    """Patch every head (denoising; answer and wrong default to each text's prediction, wrong to the
    corrupted text's runner-up when both predict the answer), then the
    clean run's direct logit attribution of logit(answer) − logit(wrong) and both texts' runs.
    InputError, before anything long runs, for what `attribution.patch_heads` refuses.
    progress(fraction, message) after each patched layer (a callback that raises stops it)."""
    if not clean.strip() or not corrupted.strip():
        raise InputError("Type both a clean and a corrupted text.")

    def layers_done(done: int, total: int) -> None:
        if progress is not None:
            progress(done / (total + 1), f"Patched layer {done} of {total}")
    patching = attribution.patch_heads(model, clean, corrupted, answer, wrong, max_tokens=max_tokens,
                                       progress=layers_done)
    dla = attribution.direct_logit(model, clean, patching.answer, patching.wrong, max_tokens=max_tokens)
    runs = [analyze(model, text, max_tokens=max_tokens) for text in (clean, corrupted)]
    if progress is not None:
        progress(1.0, "Done")
    names = [model.tokenizer.decode([i]) for i in (patching.answer, patching.wrong)]  # " Mary": its space shown
    return Explanation(dla, patching, runs[0], runs[1], names[0], names[1])


def check_budget(model: LoadedModel, clean: str, max_tokens: int | None, budget: int) -> None:
    """InputError when the page's work would hold more than `budget` bytes: both texts' attention
    (the one-head panel) and a batch of one sequence a head through the model."""
    n = tokenize(model, clean, max_tokens).n
    cost = model.attention_bytes(n) * (2 + model.num_heads / max(model.num_layers, 1))
    if cost > budget:
        raise InputError(f"Patching every head of {model.name} at {n} tokens would hold about "
                         f"{cost / 2**20:,.0f} MB (the limit here is {budget / 2**20:,.0f} MB): use shorter texts.")
