"""The speed tricks of our `MultiHeadAttention`, each named here once, beside the plain step it
replaces in `MultiHeadAttention.reference_forward` (the textbook path, which uses none of them).

1. `WeightStack`: q, k, v of self-attention from one matrix product with W_Q, W_K, W_V stacked.
2. `scaled_scores`: the scale applied to q before the product when that is exact.
3. `masked_in_place`, `softmax_in_place`, `zero_empty_rows`: the passes over the (n_q, n_k)
   scores done in the scores' own memory.
4. `fused_attention`: without probabilities, PyTorch's fused `scaled_dot_product_attention`.

tests/unit/test_fast_paths.py checks each against the plain computation and `forward` against
`reference_forward`; tests/unit/test_mha.py checks `fused_attention` (test_fused_path_equals_the_path_with_weights).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["WeightStack", "fused_attention", "masked_columns_in_place", "masked_in_place", "scaled_scores",
           "softmax_in_place", "zero_empty_rows"]


class WeightStack:
    """Trick 1. W_Q, W_K, W_V (and their biases) stacked into one matrix, so that self-attention's
    q, k, v come from one product instead of three, as PyTorch's own MHA does: one large product
    is faster than three smaller ones.

    Safe because the stack is rebuilt whenever a parameter changes: it is kept between calls
    under a key of each parameter's storage (`data_ptr`) and version counter (`_version`, which
    every in-place change bumps: an optimiser step, a `copy_`). With autograd on parameters that
    require grad it is stacked afresh each call, so gradients reach W_Q, W_K, W_V. A stack made in
    inference mode is made as an ordinary tensor, so that a later gradient pass may save it.
    The one product rounds a little differently from three (within 1e-6 in float32): the
    adapters, which must match Hugging Face bit for bit, use three.
    Shown to change nothing: test_stacked_projection_follows_weight_changes (test_mha.py),
    test_the_weight_stack_is_three_products_and_follows_changes (test_fast_paths.py)."""

    def __init__(self) -> None:
        self._kept: tuple | None = None  # (key, weight, bias)

    @staticmethod
    def applies(layers: tuple[nn.Linear, ...]) -> bool:
        """Whether the layers can be stacked: one input width, and all with a bias or none."""
        return len({lin.in_features for lin in layers}) == 1 and len({lin.bias is None for lin in layers}) == 1

    def __call__(self, layers: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The stacked weight (h·d_k + G·d_k + G·d_v, d_model) and bias (or None)."""
        params = [t for lin in layers for t in (lin.weight, lin.bias) if t is not None]
        if torch.is_grad_enabled() and any(t.requires_grad for t in params):
            return self._stack(layers)  # part of the graph: stacked afresh each call
        key = tuple((t.data_ptr(), t._version) for t in params)
        if self._kept is None or self._kept[0] != key:
            with torch.inference_mode(False), torch.no_grad():  # an ordinary tensor, even in inference mode
                self._kept = (key, *self._stack(layers))
        return self._kept[1], self._kept[2]

    @staticmethod
    def _stack(layers) -> tuple[torch.Tensor, torch.Tensor | None]:
        weight = torch.cat([lin.weight for lin in layers])  # (h·d_k + G·d_k + G·d_v, d_model)
        bias = None if layers[0].bias is None else torch.cat([lin.bias for lin in layers])
        return weight, bias


def scaled_scores(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Trick 2. The scaled scores q kᵀ · scale, (B, h, n_q, n_k), of q (B, h, n_q, d_k) and k
    (B, h, n_k, d_k). When the scale is a power of two (d_k = 64: 1/8), q is scaled before the
    product, n_k / d_k times fewer multiplications; otherwise the product is scaled in place.

    Safe because multiplying by a power of two is exact in floating point: every product and
    partial sum is the plain one times the scale, rounded the same, so the scores are bit for bit
    those of `(q @ kᵀ) * scale`, which is how Hugging Face's eager attention scales (scaling q
    first by any other number rounds differently). Shown by test_scaled_scores_are_bitwise_the_plain_ones."""
    if math.frexp(scale)[0] == 0.5:  # a power of two
        return torch.matmul(q * scale, k.transpose(-2, -1))  # (B, h, n_q, n_k)
    return torch.matmul(q, k.transpose(-2, -1)).mul_(scale)  # (B, h, n_q, n_k)


def masked_in_place(scores: torch.Tensor, blocked: torch.Tensor | None,
                    additive: torch.Tensor | None) -> torch.Tensor:
    """Trick 3a. `scores + additive`, then −inf where `blocked` (both broadcast to the scores),
    written into the scores' own memory where the result has their shape.

    Each pass over the (n_q, n_k) scores costs; a fresh buffer per pass costs more at long n
    (page faults). Safe because the scores are a fresh tensor of `scaled_scores` that nothing else
    holds, and autograd needs neither the sum's nor masked_fill's input. The result is bit for bit
    the out-of-place one when `additive` has the scores' dtype (as Hugging Face passes it; a wider
    one is rounded to the scores' dtype here). Shown by test_in_place_passes_are_bitwise_the_plain_ones."""
    def fits(mask: torch.Tensor) -> bool:
        return torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
    if additive is not None:
        scores = scores.add_(additive) if fits(additive) else scores + additive
    if blocked is not None:
        scores = scores.masked_fill_(blocked, float("-inf")) if fits(blocked) else \
            scores.masked_fill(blocked, float("-inf"))
    return scores


def masked_columns_in_place(scores: torch.Tensor, blocked: torch.Tensor | None,
                            columns: tuple[int, int] | None = None) -> torch.Tensor:
    """Trick 3a for a block of a long text's queries: −inf where `blocked` (n_q, n_k), written only over
    the columns from the first to the last that hold a blocked key: a causal block hides keys only
    near its diagonal, so most of its columns are left untouched (a pass over the whole block skipped).
    `columns` (lo, hi): that range where the caller knows it (`visibility.hidden_columns`, from the host: finding
    it in `blocked` on a GPU waits for the device, once a block); None: found in `blocked`. With `columns`, `blocked`
    may be those columns alone, (n_q, hi − lo): a long text's block of rows builds no mask over the keys it sees.
    Safe because the columns outside that range hold no blocked key. Shown by
    test_masking_the_blocked_columns_only_is_the_whole_mask."""
    if blocked is None:
        return scores
    if columns is None:
        found = torch.nonzero(blocked.any(0)).flatten()
        columns = (int(found[0]), int(found[-1]) + 1) if len(found) else None
    if columns is not None:
        lo, hi = columns
        part = blocked if blocked.shape[-1] != scores.shape[-1] else blocked[:, lo:hi]  # given whole, or its columns
        scores[..., lo:hi].masked_fill_(part, float("-inf"))
    return scores


def softmax_in_place(scores: torch.Tensor) -> torch.Tensor:
    """Trick 3b. The softmax over keys in float32, `torch.softmax(scores, -1, dtype=torch.float32)`,
    written into the scores' memory when they are float32, contiguous and outside autograd
    (`aten._softmax.out`, as PyTorch's own MHA does: at long n a fresh (n_q, n_k) buffer costs
    more than the softmax itself). Half precision, or autograd (which keeps softmax's input),
    takes the plain call. Safe because it is the same kernel on the same values, and the scores
    are not read again. Shown by test_in_place_passes_are_bitwise_the_plain_ones."""
    if scores.dtype == torch.float32 and not scores.requires_grad and scores.is_contiguous():
        return torch.ops.aten._softmax.out(scores, -1, False, out=scores)  # (B, h, n_q, n_k)
    return torch.softmax(scores, dim=-1, dtype=torch.float32)  # (B, h, n_q, n_k)


def zero_empty_rows(probs: torch.Tensor) -> torch.Tensor:
    """Trick 3c. `probs.nan_to_num(0.0)`: a row with every key blocked is 0/0, defined as no
    attention (a no-op on other rows), in place unless autograd needs softmax's output.
    Shown by test_in_place_passes_are_bitwise_the_plain_ones."""
    return probs.nan_to_num(0.0) if probs.requires_grad else probs.nan_to_num_(0.0)


def fused_attention(mha, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None,
                    key_padding_mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
    """Trick 4. `mha.attend(q, k, v, …)`'s z (B, h, n_q, d_v) without the probabilities, through
    F.scaled_dot_product_attention, which keeps no (n_q, n_k) matrix (need_weights=False).

    Safe because it is the same formula with the same masks: ours are turned into SDPA's (whose
    is_causal aligns top-left, ours the ends; it takes a mask or is_causal, not both), and rows
    with no visible key get zeros as ours do. SDPA cannot soft-cap nor add sink logits: such
    heads are computed by `attend`. Shown by test_fused_path_equals_the_path_with_weights
    (test_mha.py), within 1e-5: a fused kernel rounds differently."""
    if mha.softcap is not None or mha.sinks is not None:
        return mha.attend(q, k, v, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal)[0]
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = None  # bool, True where a query may see a key; float masks are added instead
    if (is_causal and n_q != n_k) or mha.window is not None or mha.chunk is not None:
        allowed = ~mha.hidden_keys(n_q, n_k, q.device, causal=is_causal)  # (n_q, n_k)
        is_causal = False
    if key_padding_mask is not None:
        keep = ~key_padding_mask.to(torch.bool)[:, None, None, :]  # (B, 1, 1, n_k)
        allowed = keep if allowed is None else allowed & keep
    mask = attn_mask
    if allowed is not None:
        if mask is None or mask.dtype == torch.bool:
            mask = allowed if mask is None else allowed & mask
        else:
            mask = mask.masked_fill(~allowed, float("-inf"))
    if mask is not None and is_causal:  # SDPA takes one or the other
        causal = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril()
        mask = causal & mask if mask.dtype == torch.bool else mask.masked_fill(~causal, float("-inf"))
        is_causal = False
    z = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, scale=mha.scale,
        dropout_p=mha.dropout.p if mha.training else 0.0, enable_gqa=q.shape[1] != k.shape[1],
    )  # (B, h, n_q, d_v)
    return z.nan_to_num(0.0) if mask is not None else z  # rows with no visible key: zeros
