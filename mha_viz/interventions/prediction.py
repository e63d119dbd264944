"""Heads behind a prediction: a clean and a corrupted text, each head's direct logit attribution on
the clean run and the fraction of the logit difference its clean output restores in the corrupted
run, estimated first (attribution patching, `mha_viz.interventions.estimate`) and patched for real on request
(`mha_viz.interventions.patching`), with the presets the page offers and the tables it downloads."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mha_viz.budget import capture_budget, memory
from mha_viz.capture.run import AttentionRun, capture_text
from mha_viz.interventions import attribution, patching
from mha_viz.interventions.ablation import GradientBudget
from mha_viz.progress import report
from mha_viz.text.tokenize import InputError, tokenize
from mha_viz_models import LoadedModel


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
    """What the page shows for one clean / corrupted pair: first the estimate, then, on request, real
    patching beside it."""

    dla: attribution.DirectLogit  # on the clean run: answer − wrong
    # denoising, estimated: (layers, heads, n) by position (`mha_viz.interventions.estimate`)
    estimate: attribution.Patching | None
    clean: AttentionRun  # both runs, with value norms (the one-head panel)
    corrupted: AttentionRun
    answer_text: str
    wrong_text: str
    m_clean: float  # m = logit(answer) − logit(wrong) at the last position of each text
    m_corrupted: float
    patching: attribution.Patching | None = None  # denoising, patched for real (layers, heads); None until asked
    no_estimate: str | None = None  # why there is no estimate (a backward pass that would not fit)

    @property
    def estimated(self) -> np.ndarray | None:
        """(layers, heads): each head's estimated restored fraction, every position patched."""
        return None if self.estimate is None else self.estimate.values.sum(-1)

    def agreement(self) -> attribution.Agreement | None:
        """The estimate against real patching; None unless both exist."""
        if self.patching is None or self.estimate is None:
            return None
        return attribution.agreement(self.estimated, self.patching.restored)

    def table(self) -> pd.DataFrame:
        """One row a head: layer (the model's number), head, direct logit attribution, the estimated
        restored fraction (when there is an estimate), and the real one once patched."""
        L, H = self.dla.per_head.shape
        layers, heads = np.meshgrid(np.asarray(self.clean.layer_ids), np.arange(H), indexing="ij")
        columns = {"layer": layers.ravel(), "head": heads.ravel(),
                   "direct_logit_attribution": self.dla.per_head.ravel().astype(float)}
        if self.estimate is not None:
            columns["estimated_fraction"] = self.estimated.ravel().astype(float)
        if self.patching is not None:
            columns["restored_fraction"] = self.patching.restored.ravel().astype(float)
        return pd.DataFrame(columns)

    def position_table(self) -> pd.DataFrame:
        """One row a (layer, head, position): the estimated restored fraction of patching that head
        at that position only, with the corrupted text's token there. ValueError without an estimate."""
        if self.estimate is None:
            raise ValueError(f"there is no estimate: {self.no_estimate}")
        values = self.estimate.values  # (L, H, n)
        L, H, n = values.shape
        layers, heads, positions = np.meshgrid(np.asarray(self.clean.layer_ids), np.arange(H), np.arange(n),
                                               indexing="ij")
        return pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(), "position": positions.ravel(),
                             "token": np.tile(np.asarray(self.corrupted.tokens, dtype=object), L * H),
                             "estimated_fraction": values.ravel().astype(float)})


def explain(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None, *,
            max_tokens: int | None = None, progress=None) -> Explanation:
    """The estimate of every head at every position (attribution patching: one forward on each text,
    one backward pass; answer and wrong default to each text's prediction, wrong to the corrupted
    text's runner-up when both predict the answer), the clean run's direct logit attribution of
    logit(answer) − logit(wrong) and both texts' runs. Real patching is `patch`'s. InputError, before
    anything long runs, for what `attribution.patch_heads` refuses. Where the backward pass would not
    fit the memory there is (or runs out of it), the explanation has no estimate and says why in
    `no_estimate`: real patching, which keeps no gradients, may still fit. progress(fraction,
    message) between the steps (a callback that raises stops it)."""
    if not clean.strip() or not corrupted.strip():
        raise InputError("Type both a clean and a corrupted text.")
    report(progress, 0.0, "Estimating every head: one forward pass on each text, one backward pass…")
    estimate, no_estimate = None, None
    try:
        estimate = attribution.estimate_positions(model, clean, corrupted, answer, wrong, max_tokens=max_tokens)
        a, b, ends = estimate.answer, estimate.wrong, (estimate.m_clean, estimate.m_corrupted)
    except (GradientBudget, torch.OutOfMemoryError, MemoryError) as exc:
        no_estimate = str(exc) if isinstance(exc, GradientBudget) else (
            "The backward pass of the estimate ran out of memory.")
        memory.free_cache()
        e = patching.measured_ends(model, clean, corrupted, answer, wrong, max_tokens=max_tokens)
        a, b, ends = e.a, e.b, (e.m_clean, e.m_corr)
    report(progress, 0.5, "Direct logit attribution…")
    dla = attribution.direct_logit(model, clean, a, b, max_tokens=max_tokens)
    report(progress, 0.7, "Capturing both texts' attention…")
    runs = [capture_text(model, text, max_tokens=max_tokens) for text in (clean, corrupted)]
    report(progress, 1.0, "Done")
    names = [model.tokenizer.decode([i]) for i in (a, b)]  # " Mary": its space shown
    return Explanation(dla, estimate, runs[0], runs[1], names[0], names[1], *ends, no_estimate=no_estimate)


def patch(model: LoadedModel, expl: Explanation, clean: str, corrupted: str, *, max_tokens: int | None = None,
          progress=None) -> Explanation:
    """`expl` with real patching of every head (`attribution.patch_heads`, denoising) on the same
    answer and wrong tokens. progress(fraction, message) after each patched layer (a callback that
    raises stops it)."""
    patching = attribution.patch_heads(model, clean, corrupted, expl.dla.target, expl.dla.wrong,
                                       max_tokens=max_tokens, progress=progress)
    return dataclasses.replace(expl, patching=patching)


def check_budget(model: LoadedModel, clean: str, max_tokens: int | None, *, batch: bool = True) -> None:
    """InputError when the page's work would hold more than the capture budget
    (`mha_viz.budget.capture_budget`, whose words the refusal uses): both texts' attention
    (the one-head panel) and, with `batch` (real patching), a batch of one sequence a head through
    the model. The estimate's backward pass has its own check (`ablation.check_gradient_budget`). The refusal names
    the longest text that fits (`capture_budget.longest`)."""
    n = tokenize(model, clean, max_tokens).n
    times = 2 + (model.num_heads / max(model.num_layers, 1) if batch else 0)

    def cost(tokens: int) -> int:
        return int(model.attention_bytes(tokens) * times)
    doing = "Patching every head" if batch else "Finding the heads"
    if not capture_budget.fits(cost(n)):
        fits = capture_budget.longest(cost, top=n)
        capture_budget.check(cost(n), f"{doing} of {model.name} at {n:,} tokens",
                             f"use texts of at most {fits:,} tokens (the Token limit in the sidebar cuts them there).")
