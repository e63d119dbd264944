"""What changes when heads are switched off, for the live ablation view: the loss, the top-k
predictions (the next token, or each mask token typed) and the sentence embedding, from as few
forward passes as that takes.

Public API::

    from mha_viz.interventions import ablation_outcome as outcome
    base = outcome.unablated(model, text)                 # every head on: one pass per input read
    off = outcome.ablated(model, text, keep, base=base)   # keep: bool (layers, heads), False = off
    off.loss, outcome.prediction_pairs(base, off)         # = ablation.masked_loss, predictions

A decoder's loss and next-token prediction come from one pass; the logits are made only at the
positions read (the LM head projects those rows alone). With every head kept `ablated` is `base`
itself, and mean-ablation reuses the head means `unablated` recorded on its way.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from mha_viz.budget.plan import Plan, forward
from mha_viz.interventions import heads_off_loss
from mha_viz.text.loss_inputs import EMBEDDING, MASKED_LM, NEXT_TOKEN, Inputs, loss_kind, pad, prepare, prepare_ids
from mha_viz.text.tokenize import label_ids
from mha_viz_models import LoadedModel
from mha_viz_models.loading import switch
from mha_viz_models.output_head import output_head
from mha_viz_models.reading.masking import head_mask


@dataclass
class Prediction:
    """Top-k tokens at one position, with every head on and with the chosen heads off."""

    position: str  # "next token" or "[MASK] #2 (token 7)"
    before: list[tuple[str, float]]
    after: list[tuple[str, float]]


@dataclass(frozen=True)
class Outcome:
    """What the model does on a text with one set of heads on: the loss (`ablation.masked_loss`),
    the top-k tokens at each predicted position ((label, [(token, p)…]), see `predictions`), the
    sentence embedding ((d,), EMBEDDING models) and, unablated only, each head's mean output on
    each input read (μ (layers, heads, d_v) per pass: what mean-ablation puts in place of a head)."""

    loss: float
    top: tuple[tuple[str, list[tuple[str, float]]], ...]
    embedding: torch.Tensor | None = None
    means: tuple[torch.Tensor, ...] = ()


def _top(model: LoadedModel, logits: torch.Tensor, k: int) -> list[tuple[str, float]]:
    p = torch.softmax(logits.float(), dim=-1)
    values, idx = p.topk(k)  # labelled as every token of the app (Generate's candidates too): " mat" as "␣mat"
    return list(zip(label_ids(model, idx.tolist()).display, values.tolist()))


def _predicted(model: LoadedModel, ids: list[int], kind: str) -> dict[int, str]:
    """{position: label} where the top-k is shown: the last token (decoders), each mask token typed
    (encoders with an LM head), none (embedding models)."""
    if kind == NEXT_TOKEN:
        return {len(ids) - 1: "next token"}
    if kind == EMBEDDING:
        return {}
    masks = [i for i, t in enumerate(ids) if t == model.tokenizer.mask_token_id]
    return {i: f"{model.tokenizer.mask_token} #{j + 1} (token {i})" for j, i in enumerate(masks)}


Passes = list[tuple[Inputs, dict[int, str]]]  # an Outcome's forward passes: (inputs, {position: label} to predict at)


def _passes(model: LoadedModel, text: str, max_tokens: int | None) -> Passes:
    """The forward passes an Outcome takes: (inputs, {position: label} to predict at). A decoder
    scores and predicts in one pass; a masked-LM encoder reads the text with its fixed masks for the
    loss, and as typed for the predictions (a second pass only when a mask token was typed)."""
    scored = prepare(model, text, max_tokens)
    if scored.kind != MASKED_LM:
        return [(scored, _predicted(model, scored.ids[0].tolist(), scored.kind))]
    typed = prepare_ids(model, text, max_tokens)
    at = _predicted(model, typed[0].tolist(), MASKED_LM)
    return [(scored, {})] + ([(Inputs(typed, None, MASKED_LM), at)] if at else [])


@contextmanager
def _logits_at(model: LoadedModel, rows: list[int] | None):
    """Inside: the LM head projects the hidden states of the positions `rows` only (None: every
    position), so that no vocabulary-wide row is made for a token nobody reads."""
    head = output_head(model.hf_model)
    if rows is None or not isinstance(head, torch.nn.Module):
        yield
        return
    idx = torch.tensor(rows, dtype=torch.long, device=model.device)
    handle = head.register_forward_pre_hook(lambda _m, args: (args[0].index_select(-2, idx), *args[1:]))
    try:
        yield
    finally:
        handle.remove()


def _run_pass(model: LoadedModel, inputs: Inputs, at: dict[int, str], k: int, scale: torch.Tensor,
              means: torch.Tensor | None, record: list | None) -> tuple[float | None, list, torch.Tensor | None]:
    """One forward pass under head mask `scale`: (loss or None, [(label, top-k)] at the positions
    `at`, the sentence embedding for EMBEDDING or None). The caller holds the lock, without grad."""
    if inputs.kind == EMBEDDING:
        with head_mask(model, scale, means, record):  # fused attention inside (heads_off_loss)
            return None, [], heads_off_loss.embeddings(model, pad(model, [inputs]))[0]
    if inputs.labels is None:
        rows = list(at)
    else:  # a decoder's loss reads every row; a masked-LM loss the masked positions only
        rows = None if inputs.kind == NEXT_TOKEN else (inputs.labels[0] != -100).nonzero().ravel().tolist()
    x = inputs.ids.to(model.device)
    with head_mask(model, scale, means, record), _logits_at(model, rows), switch.fused(model):
        logits = model.hf_model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False).logits[0]
    if rows is not None and logits.shape[0] != len(rows):  # a head the hook did not reach made every row
        logits = logits[torch.tensor(rows, dtype=torch.long, device=logits.device)]
    loss = None
    if inputs.labels is not None:  # the loss's cross-entropy, on the rows made (a masked-LM loss: the scored ones)
        labels = inputs.labels[0].to(model.device)
        scored = labels if rows is None else labels[rows]
        loss = float(heads_off_loss.cross_entropy(logits[None], scored[None], inputs.kind)[0])
    row = {p: p for p in at} if rows is None else {p: i for i, p in enumerate(rows)}
    return loss, [(label, _top(model, logits[row[p]], k)) for p, label in at.items()], None


class _MeanRecord(list):
    """A `head_mask` record that keeps each layer's head outputs averaged over the tokens, (H, d_v),
    instead of the outputs themselves."""

    def append(self, item) -> None:
        super().append(item[0][0].mean(0))


def _head_means(record: _MeanRecord) -> torch.Tensor:
    return torch.stack(list(record))  # (L, H, d_v)


def _outcome(model: LoadedModel, passes: Passes, scale: torch.Tensor, means: tuple, k: int,
             base: Outcome | None) -> Outcome:
    """The Outcome of the forward `passes` (`_passes`) under head mask `scale`, with `means` (one per pass) or
    zero-ablation (()). Unablated (`base` None) it records the heads' means on the way."""
    loss, tops, embedding, seen = None, [], None, []
    with model.lock, torch.no_grad():
        for i, (inputs, at) in enumerate(passes):
            record = _MeanRecord() if base is None else None
            pass_loss, pass_tops, pass_embedding = _run_pass(model, inputs, at, k, scale,
                                                             means[i] if means else None, record)
            if i == 0:  # the scored pass
                loss, embedding = pass_loss, pass_embedding
            tops += pass_tops
            if record is not None:
                seen.append(_head_means(record))
    if embedding is not None:  # 1 − cosine to the unablated embedding (itself, unablated)
        reference = embedding if base is None else base.embedding
        loss = float(heads_off_loss.embedding_loss(embedding, reference))
    return Outcome(loss, tuple(tops), embedding, tuple(seen))


def _planned(model: LoadedModel, passes: Passes, work) -> Plan[Outcome]:
    """An Outcome's plan: its passes run one after another, the longest one forward's need."""
    n = max(int(inputs.ids.shape[-1]) for inputs, _ in passes)
    return Plan(n, forward(model, n), work)


def plan_unablated(model: LoadedModel, text: str, *, k: int = 5, max_tokens: int | None = None,
                   run=None) -> Plan[Outcome]:
    """`unablated` planned (`budget.plan`): the text read once into its passes, the need the longest one's forward;
    read off `run` where its forward made what the pass would (`from_run`), with nothing to admit (`Plan.admit`).
    Raises InputError as `unablated` does, before anything runs."""
    passes = _passes(model, text, max_tokens)
    read = _read_off(model, run, passes, k)
    if read is not None:
        return Plan(len(run.token_ids), None, lambda: read, admit=False)
    ones = torch.ones(model.num_layers, model.num_heads, device=model.device)
    return _planned(model, passes, lambda: _outcome(model, passes, ones, (), k, None))


def unablated(model: LoadedModel, text: str, *, k: int = 5, max_tokens: int | None = None, run=None) -> Outcome:
    """The Outcome with every head on, each head's mean output recorded on the way (one pass per
    input read). Raises InputError for a text the loss cannot score (a decoder needs two tokens).
    run: the text's analysis (`mha_viz.analyze`); where its forward made what this pass would (`from_run`), the
    Outcome is read off it, with no forward of its own."""
    return plan_unablated(model, text, k=k, max_tokens=max_tokens, run=run).run()


def from_run(model: LoadedModel, run, text: str, k: int = 5, max_tokens: int | None = None) -> Outcome | None:
    """`unablated`'s Outcome read off an analysis `run` of `text`, when its one forward is the pass: the same token
    ids, every attention layer's head outputs (their means over the tokens: what mean-ablation puts in), the whole
    run (no token hidden), and what the model made of it (`run.own`: a decoder's loss and last logits, an embedding
    model's sentence embedding; a long run keeps the heads' means there, made by its scan). None otherwise (a
    masked-LM encoder scores another input; a lean run made no logits), or in half precision, where eager and fused
    attention round apart by more than a head's effect may be. Within float32 rounding of the pass's own numbers:
    the run's attention was eager (a long run's, its scan's blocks), the pass's fused."""
    return _read_off(model, run, _passes(model, text, max_tokens), k)


def _read_off(model: LoadedModel, run, passes: Passes, k: int) -> Outcome | None:
    """`from_run` of the text's passes."""
    own = getattr(run, "own", None)
    held = None if own is None else own.head_means if run.head_outputs is None else run.head_outputs.mean(2)
    whole = held is not None and run.hidden is None
    if own is None or model.dtype != torch.float32 or not whole or len(run.layer_ids) != model.num_layers:
        return None
    (inputs, at), *others = passes
    if others or inputs.ids[0].tolist() != list(run.token_ids):
        return None
    means = (torch.as_tensor(held).to(model.device),)  # (layers, heads, d_v)
    if inputs.kind == EMBEDDING and own.embedding is not None:
        embedding = torch.as_tensor(own.embedding).to(model.device)
        return Outcome(float(heads_off_loss.embedding_loss(embedding, embedding)), (), embedding, means)
    if inputs.kind == NEXT_TOKEN and own.loss is not None and own.last_logits is not None:
        tops = tuple((label, _top(model, torch.as_tensor(own.last_logits), k)) for label in at.values())
        return Outcome(own.loss, tops, None, means)
    return None


def ablated(model: LoadedModel, text: str, keep, *, mean_ablation: bool = False, base: Outcome | None = None,
            k: int = 5, max_tokens: int | None = None) -> Outcome:
    """The Outcome with the heads where `keep` is False switched off: zeroed, or with `mean_ablation`
    replaced by their mean output on this text. `base`: `unablated` of the same text, k and cap
    (made here when None); with every head kept it is the answer, with no pass of its own."""
    return plan_ablated(model, text, keep, mean_ablation=mean_ablation, base=base, k=k, max_tokens=max_tokens).run()


def plan_ablated(model: LoadedModel, text: str, keep, *, mean_ablation: bool = False, base: Outcome | None = None,
                 k: int = 5, max_tokens: int | None = None) -> Plan[Outcome]:
    """`ablated` planned (`budget.plan`): the text read once into its passes, the need the longest one's forward
    (`base` made on the same passes first where it is not given); with every head kept, `base`, admitting nothing."""
    keep = np.array(keep, dtype=bool)
    if base is not None and keep.all():
        return Plan(0, None, lambda: base, admit=False)  # the answer is given: no pass, no tokens read
    passes = _passes(model, text, max_tokens)

    def work() -> Outcome:
        ones = torch.ones(model.num_layers, model.num_heads, device=model.device)
        return _switched(model, passes, keep, mean_ablation, base or _outcome(model, passes, ones, (), k, None), k)
    return _planned(model, passes, work)


def _switched(model: LoadedModel, passes: Passes, keep: np.ndarray, mean_ablation: bool, base: Outcome,
              k: int) -> Outcome:
    if keep.all():
        return base
    scale = torch.as_tensor(keep, dtype=torch.float32, device=model.device)
    return _outcome(model, passes, scale, base.means if mean_ablation else (), k, base)


def prediction_pairs(base: Outcome, off: Outcome) -> list[Prediction]:
    """The top-k of two Outcomes of one text side by side, position by position."""
    return [Prediction(label, before, after) for (label, before), (_, after) in zip(base.top, off.top)]


def predictions(model: LoadedModel, text: str, keep, *, k: int = 5, mean_ablation: bool = False,
                max_tokens: int | None = None) -> list[Prediction]:
    """What the model predicts with every head on and with the heads where `keep` is False off:
    the next token after the text (decoders), or the token at each mask token the user typed
    (encoders with an LM head; none typed: an empty list). Embedding-only models: []."""
    if loss_kind(model) == EMBEDDING:
        return []
    base = unablated(model, text, k=k, max_tokens=max_tokens)
    return prediction_pairs(base, ablated(model, text, keep, mean_ablation=mean_ablation, base=base, k=k,
                                          max_tokens=max_tokens))


def embeddings(model: LoadedModel, text: str, keep, *, mean_ablation: bool = False,
               max_tokens: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """For any model: (the sentence embedding (d,) with every head on, with the heads where `keep`
    is False off). One pass, which records the heads' means, and a second only when a head is off."""
    inputs = Inputs(prepare_ids(model, text, max_tokens), None, EMBEDDING)
    keep = np.array(keep, dtype=bool)
    ones = torch.ones(model.num_layers, model.num_heads, device=model.device)
    record = _MeanRecord()
    with model.lock, torch.no_grad():
        on = _run_pass(model, inputs, {}, 0, ones, None, record)[2]
        if keep.all():
            return on, on
        means = _head_means(record) if mean_ablation else None
        scale = torch.as_tensor(keep, dtype=torch.float32, device=model.device)
        return on, _run_pass(model, inputs, {}, 0, scale, means, None)[2]


def compare_embeddings(text: tuple[torch.Tensor, torch.Tensor],
                       other: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict[str, float]:
    """From (embedding on, embedding off) of the text and of a second sentence (None: no second
    sentence): the cosine of the text's two embeddings, and the similarity of the two sentences
    with every head on and with the heads off."""
    on, off = text
    out = {"cosine to unablated": float(F.cosine_similarity(on, off, dim=0))}
    if other is not None:
        out["similarity before"] = float(F.cosine_similarity(on, other[0], dim=0))
        out["similarity after"] = float(F.cosine_similarity(off, other[1], dim=0))
    return out


def embedding_change(model: LoadedModel, text: str, keep, other: str | None = None, *,
                     mean_ablation: bool = False, max_tokens: int | None = None) -> dict[str, float]:
    """For any model: the cosine between the sentence embedding (mean of the last hidden states)
    with the heads where `keep` is False off and with every head on; with `other`, the cosine
    similarity of the two sentences' embeddings before and after."""
    pairs = [embeddings(model, t, keep, mean_ablation=mean_ablation, max_tokens=max_tokens)
             for t in (text, other) if t is not None]
    return compare_embeddings(*pairs)
