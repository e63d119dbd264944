"""Which heads matter: switch heads off and measure what changes (`docs/head-metrics.md`, section 3).

Public API::

    from mha_viz.interventions import ablation
    imp = ablation.head_importance(model, text)     # numpy (layers, heads), each layer's row L2-normalised
    plan = ablation.plan_importance(model, text)    # the same, planned: plan.need admitted, then plan.run()
    loss = ablation.masked_loss(model, text, keep)  # float; keep: bool (layers, heads), False = masked

The loss (`loss_kind`: next-token, masked-LM or 1 − cosine of the sentence embedding) and the
ids and targets it reads are `mha_viz.text.loss_inputs`; the loss with heads switched off is
computed by `mha_viz.interventions.heads_off_loss`, for one text here as a batch of one (its ablation effects:
copies of it side by side, each with its own head off, `effect_rows` a forward).

Masking multiplies each head's output z_h by ξ_h before W_O (`mha_viz_models.reading.masking`), so
`masked_loss` with every head of a layer masked equals that layer's attention output being W_O's
bias alone.

What the live view shows with a set of heads off (the loss, the top-k predictions, the sentence
embedding), from as few forward passes as possible, is in `ablation_outcome`.
"""

from __future__ import annotations

import numpy as np
import torch

from mha_viz import settings
from mha_viz.budget import capture_budget, memory
from mha_viz.budget.plan import Plan, forward_bytes, on_device
from mha_viz.interventions import heads_off_loss
from mha_viz.text.loss_inputs import EMBEDDING, Batch, Inputs, pad, prepare, tiled
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.attention.heads import padded_heads
from mha_viz_models.loading import switch
from mha_viz_models.reading.masking import head_mask

# A bundled paragraph to score heads on when the user's sentence is short.
SAMPLE_PARAGRAPH = (
    "The old lighthouse stood at the edge of the harbour for more than a hundred years. Every "
    "night its keeper climbed the narrow stairs, lit the lamp and watched the ships come home. "
    "When the storm came in the winter of that year, the keeper stayed awake until morning, and "
    "the fishing boats followed the light back into the harbour one by one. The town still tells "
    "the story: the keeper kept the light burning, and every boat came home."
)
PRUNE_FRACTIONS = [i / 10 for i in range(10)]  # the pruning curve's steps: 0 %, 10 %, … 90 % of heads off


def _loss_under(model: LoadedModel, inputs: Inputs, scale: torch.Tensor, means=None,
                reference: torch.Tensor | None = None, record: list | None = None) -> torch.Tensor:
    """The loss of one text (a batch of one, `heads_off_loss.losses`) with head mask `scale` (a tensor,
    possibly requiring grad); for EMBEDDING, `reference` (1, d) is the unablated sentence embedding."""
    with head_mask(model, scale, means, record):
        return heads_off_loss.losses(model, pad(model, [inputs]), reference)[0]


def _reference(model: LoadedModel, inputs: Inputs) -> torch.Tensor | None:
    if inputs.kind != EMBEDDING:
        return None
    with torch.no_grad():
        return heads_off_loss.embeddings(model, pad(model, [inputs]))


def head_means(model: LoadedModel, inputs: Inputs) -> torch.Tensor:
    """μ (layers, heads, d_v): each head's output averaged over the text's tokens, unablated
    (what mean-ablation puts in place of a head)."""
    record: list = []
    ones = torch.ones(model.num_layers, model.num_heads, device=model.device)
    with torch.no_grad():
        with head_mask(model, ones, None, record):
            heads_off_loss.last_hidden(model, pad(model, [inputs]))  # the heads' outputs are recorded on the way
    means = [z[0].mean(0) for z, _ in record]  # (H, d_v) a layer; Gemma 4's smaller heads padded with zeros
    size = max(mean.shape[-1] for mean in means)
    return torch.stack([padded_heads(mean, size) for mean in means])  # (L, H, d_v)


def masked_loss(model: LoadedModel, text: str, keep, *, mean_ablation: bool = False,
                max_tokens: int | None = None) -> float:
    """The model's loss on `text` (`mha_viz.text.loss_inputs`) with the heads where `keep` is False
    switched off: zeroed, or with `mean_ablation` replaced by their mean output on this text."""
    keep = np.array(keep, dtype=bool)
    inputs = prepare(model, text, max_tokens)
    with model.lock:
        reference = _reference(model, inputs)
        means = head_means(model, inputs) if mean_ablation and not keep.all() else None  # unused with every head on
        scale = torch.as_tensor(keep, dtype=torch.float32, device=model.device)
        with torch.no_grad():
            return float(_loss_under(model, inputs, scale, means, reference))


def gradient_bytes(model: LoadedModel, n: int, *, logit_rows: int | None = None, fused: bool = False) -> int:
    """About how many bytes a gradient pass over n tokens holds at its peak (float32): for every
    layer the probabilities autograd keeps (H n²) and about 24 activations of width d_model per
    token (q, k, v, the MLP's wide hidden layer, norms, RoPE, residuals); the backward pass's own
    n × n buffers for one layer (3 H n²); the logits, their softmax and gradient (3 n ×
    `memory.logits_width`: none for an embedding model). Measured against the peak resident size
    above the loaded model (tests/models/test_memory_peak.py, `benchmarks/memory_peak.py`: SmolLM2 at
    n = 128…1,024, MiniLM at 128…512): 0.9–1.3 × (the same pass peaks up to 20 % apart from run to
    run). logit_rows: the positions whose logits are made (default n; 1 where the model computes the
    last position's only). fused: the pass runs inside `switch.fused` (head gradients, attribution patching, a
    corpus's importance); where the model does switch to SDPA (`switch.fuses`) no n × n array is kept or made,
    and about 14 activations a token remain (measured 0.97–1.17 × the live peak at the same lengths, glibc's
    allocator kept from holding freed blocks: `tests/models/memory_probe.py`)."""
    H, L, d = model.num_heads, model.num_layers, model.d_model
    rows = n if logit_rows is None else logit_rows
    if fused and switch.fuses(model):
        return 4 * (L * 14 * n * d + 3 * rows * memory.logits_width(model))
    return 4 * (L * (H * n * n + 24 * n * d) + 3 * H * n * n + 3 * rows * memory.logits_width(model))


class GradientBudget(InputError):
    """A gradient pass refused before it runs: it would not fit the memory there is."""


def check_gradient_budget(model: LoadedModel, n: int, *, doing: str | None = None,
                          logit_rows: int | None = None, rows: int = 1, extra: int = 0, fused: bool = False) -> None:
    """Raise GradientBudget (an InputError), with the figures, when a gradient pass over n tokens would hold more than
    the memory budget (MHA_VIZ_MAX_CAPTURE_MB) or than the memory free where it runs (the GPU's,
    or the host's: `memory.room`), before anything runs. `doing`: what the message says the pass is;
    logit_rows as in `gradient_bytes`; rows: passes side by side (a batch); extra: bytes the pass holds
    besides (a circuit's per-receiver inputs); fused as in `gradient_bytes`."""
    def cost(tokens: int) -> int:
        return rows * gradient_bytes(model, tokens, logit_rows=logit_rows, fused=fused) + extra
    need, room = cost(n), memory.room(model.device)
    budget, where = room.capture, "allowed here (MHA_VIZ_MAX_CAPTURE_MB)"
    if room.device and room.gpu < budget:
        budget, where = room.gpu, f"free on the GPU ({room.device})"
    elif not room.device and room.host < budget:
        budget, where = room.host, "available on this machine"
    if need > budget:
        raise GradientBudget(
            f"{doing or f'Scoring the heads of {model.name} by their gradients'} over {n} tokens would hold about "
            f"{settings.size_text(need)} ({settings.size_text(need - budget)} more than the "
            f"{settings.size_text(budget)} {where}). {_fitting(capture_budget.longest(cost, budget, top=n))}")


def _fitting(tokens: int) -> str:
    """What a refused gradient pass offers: the longest text that fits."""
    if tokens < 2:
        return "Not even two tokens fit: pick a smaller model or a lower precision."
    return (f"At most {tokens:,} tokens fit: lower the token limit in the sidebar to {tokens:,}, or use a shorter "
            "text.")


def head_gradients(model: LoadedModel, text: str, *, max_tokens: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """At ξ = 1: (∂L/∂ξ (layers, heads), Michel et al.'s per-token importance (layers, heads)
    = Σ_t |⟨z_{h,t}, ∂L/∂z_{h,t}⟩| / n, before normalisation). Decoders and masked-LM encoders.
    Raises InputError when the pass would not fit the memory budget (`check_gradient_budget`)."""
    inputs = prepare(model, text, max_tokens)
    if inputs.kind == EMBEDDING:
        raise ValueError("an embedding-only model's 1 − cosine loss is at its minimum with every head on "
                         "(zero gradient): use ablation importance (head_importance does)")
    check_gradient_budget(model, inputs.ids.shape[1], fused=True)  # heads_off_loss runs it on SDPA
    return _gradients(model, inputs)


def _gradients(model: LoadedModel, inputs: Inputs) -> tuple[np.ndarray, np.ndarray]:
    """`head_gradients` on inputs already read and admitted."""
    record: list = []
    with model.lock, torch.enable_grad():
        scale = torch.ones(model.num_layers, model.num_heads, device=model.device, requires_grad=True)
        loss = _loss_under(model, inputs, scale, record=record)
        outs = [out for _, out in record]
        grads = torch.autograd.grad(loss, [scale, *outs])
    d_scale, d_outs = grads[0], grads[1:]
    n = inputs.ids.shape[1]
    # (H,) from each layer's device (a model spread over GPUs), summed in float32 whatever the model computes in:
    # numpy has no bfloat16 (a bfloat16 model's importance failed), and half precision would round every token's term
    per_token = torch.stack([((z.detach().float() * g.float()).sum(-1).abs().sum(dim=(0, 1)) / n).cpu()
                             for (z, _), g in zip(record, d_outs)])
    return d_scale.detach().float().cpu().numpy(), per_token.numpy()


def ablation_effects(model: LoadedModel, text: str, *, mean_ablation: bool = False,
                     max_tokens: int | None = None, progress=None) -> np.ndarray:
    """(layers, heads): the loss with head h alone switched off, minus the loss with every
    head on — the ground truth that importance scores approximate. One forward pass a head, run
    side by side in batches (`effect_rows`)."""
    return _effects(model, prepare(model, text, max_tokens), mean_ablation=mean_ablation, progress=progress)


BATCH_BYTES = 256 * 2**20  # what the rows of one forward of `under_masks` may hold together (`effect_rows`)
# the copies of one text's logits the loss holds at a time (`heads_off_loss.cross_entropy` takes a text at a time):
# float32 (half precision) and log-softmax, and one more as a margin
LOSS_COPIES = 3


def loss_bytes(model: LoadedModel, n: int) -> int:
    """What the losses of a forward hold besides its logits, however many rows it has: one text's LOSS_COPIES copies of
    its n tokens' logits. (Until stop 111 the loss copied every row's logits three times at once: 91 rows of 13 tokens
    of SmolLM2 in float32 peaked at 650 MiB, 7.1 MiB a row.)"""
    return 4 * LOSS_COPIES * n * memory.logits_width(model)


def effect_rows(model: LoadedModel, n: int, texts: int = 1, masks: int | None = None) -> int:
    """How many rows of n tokens `under_masks` runs side by side for a batch of `texts` texts under `masks` head masks
    (default: `each_head_off`'s, every head alone and none): the texts under as many masks at once as hold
    BATCH_BYTES together (each mask's rows' `forward_bytes`, and the loss's `loss_bytes` once), at most `masks`, at
    least one mask (the texts themselves). A forward of a few tokens reads the whole model for little arithmetic:
    SmolLM2's 271 runs of 15 tokens took 30.1 s one at a time and 10.0 s as 13 batches of 21 rows, MiniLM's 73 runs
    of 17 tokens 0.75 s and 0.22 s as one; with the loss a text at a time (`loss_bytes`), SmolLM2's runs of 14 tokens
    go 82 rows a batch, 8.1–8.4 s → 6.9–7.1 s (docs/speed.md)."""
    masks = model.num_layers * model.num_heads + 1 if masks is None else masks
    at_once = (BATCH_BYTES - loss_bytes(model, n)) // max(forward_bytes(model, n, texts), 1)
    return max(1, min(masks, at_once)) * texts


def effects_bytes(model: LoadedModel, n: int, texts: int = 1, masks: int | None = None) -> int:
    """The most `under_masks` holds at once on batches of at most `texts` texts of at most n tokens under `masks`
    masks: one mask's rows, or as many as BATCH_BYTES holds. A bound for every smaller batch too (the last of a
    corpus, one padded to fewer tokens), which runs more masks at once within the same bytes."""
    masks = model.num_layers * model.num_heads + 1 if masks is None else masks
    one, loss = forward_bytes(model, n, texts), loss_bytes(model, n)
    return max(one + loss, min(masks * one + loss, BATCH_BYTES))


def effects_need(model: LoadedModel, n: int, texts: int = 1, masks: int | None = None) -> memory.Need:
    """`effects_bytes` where the model runs."""
    return on_device(model, effects_bytes(model, n, texts, masks))


def under_masks(model: LoadedModel, batch: Batch, scales: torch.Tensor, reference: torch.Tensor | None = None,
                means=None, progress=None) -> torch.Tensor:
    """(B, M) float64: each text's loss under each head mask of `scales` (M, L, H) (`head_mask`'s ξ), `reference`
    (B, d) the unablated sentence embeddings of an embedding model. The batch runs under as many masks at once as
    `effect_rows` allows, its texts' copies side by side, each under its own mask. The caller holds `model.lock` and
    no grad; `progress(fraction, message)` after each forward."""
    progress = progress or (lambda _f, _m: None)
    B, N = batch.ids.shape
    M = len(scales)
    if M == 0:
        return torch.zeros(B, 0, dtype=torch.float64)
    at_once = effect_rows(model, N, B, M) // B
    losses = []
    for start in range(0, M, at_once):
        scale = scales[start:start + at_once]  # (C, L, H): copy c of every text under mask start + c
        copies = len(scale)
        with head_mask(model, scale.repeat_interleave(B, dim=0), means):
            losses.append(heads_off_loss.losses(model, tiled(batch, copies),
                                                None if reference is None else reference.repeat(copies, 1))
                          .double().cpu().view(copies, B))
        progress((start + copies) / M, f"{start + copies} of {M} head masks")
    return torch.cat(losses).T


def each_head_off(model: LoadedModel, batch: Batch, reference: torch.Tensor | None = None, means=None,
                  progress=None) -> torch.Tensor:
    """(B, 1 + L·H) float64: each text's loss with every head on (column 0) and with head (l, h) alone off (column
    1 + l·H + h) (`under_masks`)."""
    L, H = model.num_layers, model.num_heads
    scales = torch.ones(L * H + 1, L, H, device=model.device)  # mask 0: every head on; 1 + l·H + h: (l, h) off
    scales[1:].view(L * H, L * H)[torch.arange(L * H), torch.arange(L * H)] = 0.0
    return under_masks(model, batch, scales, reference, means, progress)


def _effects(model: LoadedModel, inputs: Inputs, *, mean_ablation: bool = False, progress=None) -> np.ndarray:
    """`ablation_effects` on inputs already read (`each_head_off` of the text alone)."""
    L, H = model.num_layers, model.num_heads
    with model.lock, torch.no_grad():
        reference = _reference(model, inputs)
        means = head_means(model, inputs) if mean_ablation else None
        loss = each_head_off(model, pad(model, [inputs]), reference, means, progress)[0].numpy()
    return (loss[1:] - loss[0]).reshape(L, H)


def _normalise_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x, dtype=np.float64), where=norms > 0)


def head_importance(model: LoadedModel, text: str, *, max_tokens: int | None = None) -> np.ndarray:
    """Michel et al.'s gradient importance (`docs/head-metrics.md`, section 3) on `text`, each layer's row divided
    by its L2 norm: numpy (layers, heads). For an embedding-only encoder, whose loss has zero
    gradient with every head on, the ablation effect of each head alone (clipped at 0) instead."""
    return plan_importance(model, text, max_tokens=max_tokens).run()


def plan_importance(model: LoadedModel, text: str, *, max_tokens: int | None = None) -> Plan[np.ndarray]:
    """`head_importance` planned (`budget.plan`): the text read once; its need that of the pass that runs (the
    gradient pass on fused attention, `gradient_bytes(fused=True)`; an embedding-only encoder's forward passes,
    `effect_rows` at a time); a gradient pass that can never fit refused here (`GradientBudget`, naming the longest
    text that fits). `run()` scores on the same tokens."""
    inputs = prepare(model, text, max_tokens)
    n = inputs.ids.shape[1]
    if inputs.kind == EMBEDDING:
        return Plan(n, effects_need(model, n), lambda: _normalise_rows(np.clip(_effects(model, inputs), 0, None)))
    check_gradient_budget(model, n, fused=True)  # heads_off_loss runs it on SDPA
    return Plan(n, on_device(model, gradient_bytes(model, n, fused=True)),
                lambda: _normalise_rows(_gradients(model, inputs)[1]))


def pruning_curve(model: LoadedModel, text: str, order: np.ndarray, fractions, *,
                  mean_ablation: bool = False, max_tokens: int | None = None) -> np.ndarray:
    """The loss after masking the first ⌈f · L·H⌉ heads of `order` (flat indices layer · H + head),
    for each fraction f."""
    return pruning_curves(model, text, [order], fractions, mean_ablation=mean_ablation, max_tokens=max_tokens)[0]


def pruning_curves(model: LoadedModel, text: str, orders, fractions, *, mean_ablation: bool = False,
                   max_tokens: int | None = None) -> np.ndarray:
    """(orders, fractions): `pruning_curve` for each order, sharing the reference, the means and the
    passes that mask the same heads (every order's f = 0)."""
    return plan_pruning(model, text, orders, fractions, mean_ablation=mean_ablation, max_tokens=max_tokens).run()


def plan_pruning(model: LoadedModel, text: str, orders, fractions, *, mean_ablation: bool = False,
                 max_tokens: int | None = None) -> Plan[np.ndarray]:
    """`pruning_curves` planned (`budget.plan`): the text read once, its need that of its masks' runs side by side
    (`effects_need`)."""
    inputs = prepare(model, text, max_tokens)
    n = inputs.ids.shape[1]
    scales, which = pruned_masks(model, orders, fractions)  # made once, for the need and the run
    return Plan(n, effects_need(model, n, masks=len(scales)),
                lambda: _curves(model, inputs, scales, which, mean_ablation))


def pruned_masks(model: LoadedModel, orders, fractions) -> tuple[torch.Tensor, np.ndarray]:
    """The distinct head masks of every order's pruning steps, (M, L, H), and which of them each (order, fraction)
    is, (orders, fractions)."""
    L, H = model.num_layers, model.num_heads
    seen: dict[bytes, int] = {}
    masks, which = [], np.zeros((len(orders), len(fractions)), dtype=np.int64)
    for i, order in enumerate(orders):
        for j, f in enumerate(fractions):
            scale = np.ones(L * H, dtype=np.float32)
            scale[np.array(order[: int(np.ceil(f * L * H))], dtype=np.int64)] = 0.0  # a copy: a reversed order too
            key = scale.tobytes()
            if key not in seen:
                seen[key] = len(masks)
                masks.append(scale.reshape(L, H))
            which[i, j] = seen[key]
    return torch.from_numpy(np.stack(masks) if masks else np.ones((0, L, H), np.float32)), which


def _curves(model: LoadedModel, inputs: Inputs, scales: torch.Tensor, which: np.ndarray,
            mean_ablation: bool) -> np.ndarray:
    """`pruning_curves` of `pruned_masks`' masks and their places."""
    if not which.size:  # no order or no fraction: nothing to run
        return np.zeros(which.shape)
    with model.lock, torch.no_grad():
        reference = _reference(model, inputs)
        means = head_means(model, inputs) if mean_ablation else None
        losses = under_masks(model, pad(model, [inputs]), scales.to(model.device), reference, means)[0].numpy()
    return losses[which]
