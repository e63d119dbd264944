"""Head importance over many documents at once: the per-text scores of `mha_viz.interventions.ablation`, batched.

`batch_importance(model, texts)` is the SUM over the documents of each document's own importance
before normalisation (the corpus engine adds batches and normalises once at the end):

- decoders and masked-LM encoders: Michel et al.'s per-token importance Σ_t |⟨z_{h,t}, ∂L/∂z_{h,t}⟩| / n,
  exactly what `ablation.head_gradients(model, text)[1]` gives for one text. The documents of a batch
  run padded, with their attention masks, in one forward and one backward pass of Σ_b L_b: document
  b's loss depends only on its own z_b, so ∂(Σ_b L_b)/∂z_b is b's own gradient;
- embedding-only encoders (minilm), whose loss has zero gradient with every head on: the ablation
  effect of each head alone clipped at 0 (`ablation.head_importance`'s choice): the whole batch under
  one head mask a copy, several copies side by side (`ablation.each_head_off`).

`pruning_curve(model, texts, order, fractions)` is the mean over held-out documents of
`ablation.pruning_curve`: the check that a corpus importance order holds on texts it was not
computed on. Documents without a loss (a one-token text for a decoder; a masked-LM text with no
word piece to mask) score nothing and are skipped by both.

Each document's loss is `mha_viz.interventions.heads_off_loss.losses` on a padded batch
(`mha_viz.text.loss_inputs.pad`): the function the per-text scores compute it with, one text at a time.
"""

from __future__ import annotations

import numpy as np
import torch

from mha_viz.budget import capture_budget
from mha_viz.budget.plan import Plan
from mha_viz.interventions import ablation, heads_off_loss
from mha_viz.interventions.ablation import check_gradient_budget, gradient_bytes
from mha_viz.text.loss_inputs import EMBEDDING, Batch, Inputs, pad, scorable
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.reading.masking import head_mask


class Unavailable(Exception):
    """Head importance cannot be computed for this model; the message says why."""


def _check_maskable(model: LoadedModel) -> None:
    if not model.attention_modules:
        raise Unavailable(f"The heads of '{model.name}' cannot be switched off: mha-viz cannot find where "
                          "their outputs meet W_O, so their importance cannot be measured.")


def _chunks(model: LoadedModel, items: list[Inputs]):
    """Consecutive runs of `items` whose gradient pass fits the memory budget: B documents padded
    to N tokens hold about B × `gradient_bytes(N)`. A document that does not fit alone raises
    InputError (`check_gradient_budget`), as it does for one text."""
    budget = capture_budget.capture_budget()
    run: list[Inputs] = []
    for x in items:
        check_gradient_budget(model, x.ids.shape[1], fused=True)  # heads_off_loss runs it on SDPA
        longest = max([x.ids.shape[1]] + [y.ids.shape[1] for y in run])
        if run and not capture_budget.fits((len(run) + 1) * gradient_bytes(model, longest, fused=True), budget):
            yield run
            run = []
        run.append(x)
    if run:
        yield run


def _gradient_importance(model: LoadedModel, batch: Batch) -> np.ndarray:
    """(L, H): Σ_b Σ_t |⟨z_{b,h,t}, ∂L_b/∂z_{b,h,t}⟩| / n_b over the batch's real tokens."""
    record: list = []
    with model.lock, torch.enable_grad():
        scale = torch.ones(model.num_layers, model.num_heads, device=model.device, requires_grad=True)
        with head_mask(model, scale, None, record):
            total = heads_off_loss.losses(model, batch).sum()
        grads = torch.autograd.grad(total, [out for _, out in record])
    real = batch.mask[..., None].to(torch.float32)  # (B, N, 1)
    per_layer = []
    for (z, _), g in zip(record, grads):  # z, g: (B, N, H, d_v)
        per_token = (z.detach() * g).sum(-1).abs().float() * real  # (B, N, H)
        per_layer.append((per_token.sum(1) / batch.n[:, None]).sum(0))  # (H,)
    return torch.stack(per_layer).double().cpu().numpy()


def _ablation_importance(model: LoadedModel, batch: Batch) -> np.ndarray:
    """(L, H): Σ_b max(0, loss_b with head h alone off − loss_b with every head on) (`ablation.each_head_off`)."""
    with model.lock, torch.no_grad():
        losses = ablation.each_head_off(model, batch, heads_off_loss.embeddings(model, batch)).numpy()  # (B, 1 + L·H)
    effects = np.clip(losses[:, 1:] - losses[:, :1], 0, None).sum(0)
    return effects.reshape(model.num_layers, model.num_heads)


def batch_importance(model: LoadedModel, texts: list[str], *, max_tokens: int | None = 128) -> np.ndarray:
    """(layers, heads) float64: the sum over `texts` of each one's importance before normalisation
    (see the module doc). Raises Unavailable when the heads cannot be masked, InputError when one
    document alone would not fit the gradient memory budget."""
    _check_maskable(model)
    items = scorable(model, list(texts), max_tokens)
    total = np.zeros((model.num_layers, model.num_heads))
    if not items:
        return total
    if items[0].kind == EMBEDDING:  # no gradient: the batch under L·H + 1 masks (`ablation.each_head_off`)
        return total + _ablation_importance(model, pad(model, items))
    for run in _chunks(model, items):
        total += _gradient_importance(model, pad(model, run))
    return total


def plan_pruning_curves(model: LoadedModel, texts: list[str], orders, fractions, *, max_tokens: int | None = 128,
                        batch_size: int = 16) -> Plan[np.ndarray]:
    """(len(orders), len(fractions)), `pruning_curve` of each order, planned (`budget.plan`): the documents read once
    for every order, the need that of `batch_size` documents padded to the longest under as many of the fractions'
    masks at once as fit (`ablation.effects_bytes`, a bound for the smaller batches too). Raises as
    `pruning_curve` does, before anything runs."""
    _check_maskable(model)
    items = scorable(model, list(texts), max_tokens)
    if not items:
        raise InputError("None of these documents has anything to score (each is too short); use longer texts.")
    n = max(int(item.ids.shape[-1]) for item in items)
    orders = [np.asarray(order, dtype=np.int64) for order in orders]
    return Plan(n, ablation.effects_need(model, n, min(len(items), batch_size), len(fractions)),
                lambda: np.stack([_pruned(model, items, order, fractions, batch_size) for order in orders]))


def pruning_curve(model: LoadedModel, texts: list[str], order, fractions, *, max_tokens: int | None = 128,
                  batch_size: int = 16) -> np.ndarray:
    """(len(fractions),): the mean over `texts` of each one's loss after masking the first
    ⌈f · L·H⌉ heads of `order` (flat indices layer · H + head): `ablation.pruning_curve` averaged
    over documents, computed `batch_size` documents at a time. Raises InputError when no text
    has a loss."""
    return plan_pruning_curves(model, texts, [order], fractions, max_tokens=max_tokens, batch_size=batch_size).run()[0]


def _pruned(model: LoadedModel, items: list[Inputs], order: np.ndarray, fractions, batch_size: int) -> np.ndarray:
    """The summed loss of `items` after masking each fraction's prefix of `order`: each batch of `batch_size` under
    every fraction's mask (`ablation.under_masks`, as many side by side as fit)."""
    scales, which = ablation.pruned_masks(model, [order], fractions)
    scales = scales.to(model.device)
    sums = np.zeros(len(fractions))
    with model.lock, torch.no_grad():
        for start in range(0, len(items), batch_size):
            batch = pad(model, items[start:start + batch_size])
            reference = heads_off_loss.embeddings(model, batch) if batch.kind == EMBEDDING else None
            sums += ablation.under_masks(model, batch, scales, reference).numpy()[:, which[0]].sum(0)
    return sums / len(items)
