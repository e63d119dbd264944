"""Each head's values v, read off the model's own modules: where a layer's values come out
(`ValuePath`), and the check at load that what mha-viz reads as the heads' outputs z (the input of
the layer that applies W_O) and as their values really are them (`check_heads`):

- W_O read as (H, d_v, d_model) blocks gives, applied to the recorded z, what that layer wrote;
- where the values are read, z_h = Σ_j A[h, i, j] v_j of the KV head that query head h reads:
  z is the heads' outputs, head by head, and v their values.

This is what lets every per-head feature (head outputs, the contributions lens, direct logit
attribution, patching) work with Hugging Face's own attention, whether or not our MHA can stand in.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ValuePath:
    """A layer's values come out of `module`, whose output (B, n, heads · stride) holds, for each
    of its `heads` key/value heads, a block of `stride` columns with the head's d_v values from
    `offset` on (DeepSeek's MLA: each head's block of kv_b_proj is [k_nope | v]); with `by_head`, the
    output is (B, n, heads, d_v) already (a norm over each head's values, Gemma 3n's and Gemma 4's v_norm)."""

    module: nn.Module
    heads: int
    d_v: int
    offset: int = 0
    by_head: bool = False

    def split(self, out: torch.Tensor) -> torch.Tensor:
        """The module's output (B, n, heads · stride) as values (B, G, n, d_v) (MLA's kv_b_proj
        writes (B, 1, n, heads · stride): the latent is viewed as one head)."""
        if self.by_head:
            return out[..., self.offset:self.offset + self.d_v].transpose(1, 2)  # (B, n, G, d_v) -> (B, G, n, d_v)
        B, n, width = out.shape[0], out.shape[-2], out.shape[-1]
        blocks = out.reshape(B, n, self.heads, width // self.heads)  # (B, n, G, stride)
        return blocks[..., self.offset:self.offset + self.d_v].transpose(1, 2)


@dataclass(frozen=True)
class ReusedValues:
    """A layer that makes no keys or values of its own but reuses those of an earlier layer (Gemma 3n's and
    Gemma 4's KV sharing): that layer's number in the model (its attention module's `layer_idx`), whose
    `ValuePath` is this layer's too."""

    layer_idx: int


def output_blocks(w_o: nn.Module, num_heads: int) -> torch.Tensor:
    """W_O of an output layer as each head's rows: (H, d_v, d_model). An nn.Linear's weight is
    (d_model, H · d_v); GPT-2's Conv1D computes x @ W with W (H · d_v, d_model)."""
    weight = w_o.weight.detach()
    if isinstance(w_o, nn.Linear):
        weight = weight.T  # (H · d_v, d_model): as x @ W
    elif not hasattr(w_o, "nf"):  # Conv1D (its output width `nf`) is x @ W already
        raise TypeError(f"{type(w_o).__name__} is not a linear layer mha-viz reads")
    return weight.reshape(num_heads, weight.shape[0] // num_heads, weight.shape[1])


def padded_heads(blocks: torch.Tensor, size: int, dim: int = -1) -> torch.Tensor:
    """`blocks` with dimension `dim` (each head's d_v) zero-padded to `size`: a model whose layers' heads differ in
    size (Gemma 4's global layers hold larger heads than its sliding ones) stacks every layer's heads' outputs z and
    W_O blocks at the largest, and the zeros add nothing to z @ W_O, to a norm or to an inner product."""
    short = size - blocks.shape[dim]
    if short <= 0:
        return blocks
    after = blocks.dim() - 1 - dim % blocks.dim()  # the dimensions after `dim`: F.pad's pairs run from the last
    return torch.nn.functional.pad(blocks, [0, 0] * after + [0, short])


def all_padded(blocks) -> tuple[torch.Tensor, ...]:
    """Each of `blocks` (each layer's heads' outputs, (…, d_v)) zero-padded to the largest d_v among them."""
    size = max((b.shape[-1] for b in blocks), default=0)
    return tuple(padded_heads(b, size) for b in blocks)


def kv_head(head, num_heads: int, num_kv_heads: int):
    """The key/value head that query head `head` reads (an int, or an integer array of heads): head // (H / G),
    itself where every query head has its own (grouped-query attention shares one among H / G)."""
    return head // (num_heads // num_kv_heads)


def expand_kv(v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Values (B, G, n, d_v) for each of H query heads (B, H, n, d_v): query head h reads KV head h // (H / G)."""
    return v.repeat_interleave(num_heads // v.shape[1], dim=1)


def _far(a: torch.Tensor, b: torch.Tensor, tolerance: float) -> bool:
    """Whether a and b differ by more than `tolerance` relative to b's largest entry."""
    return float((a.float() - b.float()).abs().max()) > tolerance * (float(b.float().abs().max()) or 1.0)


def output_problem(z: torch.Tensor, written: torch.Tensor, w_o: nn.Module, tolerance: float) -> str | None:
    """Why W_O read as (H, d_v, d_model) blocks does not give, applied to z (B, H, n, d_v) (the recorded
    input of the W_O layer, head by head), what that layer wrote (B, n, d_model); None when it does."""
    try:
        blocks = output_blocks(w_o, z.shape[1]).float()  # (H, d_v, d_model)
    except (TypeError, RuntimeError):
        return f"its output layer ({type(w_o).__name__}) is not a linear map mha-viz reads"
    bias = 0 if getattr(w_o, "bias", None) is None else w_o.bias.detach().float()
    through = torch.einsum("bhnd,hdm->bnm", z.float(), blocks) + bias  # Σ_h z_h W_O[h] + b
    if through.shape != written.shape or _far(through, written, tolerance):
        return f"its output layer ({type(w_o).__name__}) does not apply W_O to the heads' outputs side by side"
    return None


def values_problem(z: torch.Tensor, probs: torch.Tensor, values: torch.Tensor, tolerance: float) -> str | None:
    """Why z (B, H, n, d_v) is not each head's attention probs (B, H, n, n) over its values (B, G, n, d_v):
    z_h = Σ_j A[h, i, j] v_j; None when it is."""
    if values.shape[-1] != z.shape[-1] or z.shape[1] % values.shape[1]:
        return "its values do not have the heads' width"
    if _far(probs.float() @ expand_kv(values.float(), z.shape[1]), z, tolerance):
        return ("each head's output is not its attention over its values (the layer changes them after attention, "
                "as a gate does)")
    return None
