"""How token positions enter q and k: rotary position embeddings (RoPE) in the layouts Hugging
Face's models hand their attention, and Llama 4's temperature tuning of the queries on its
layers without RoPE.

RoPE turns each pair of dimensions of q and k by an angle proportional to the position. Models
differ in which dimensions make a pair and in how they pass the angles:
- "halves" (Llama, GPT-NeoX, most): dimension i pairs with i + d/2; cos and sin (…, r) hold each
  angle twice, [θ_0 … θ_{r/2−1}, θ_0 … θ_{r/2−1}]; r < d is partial rotary (the first r turn).
- "halves_once" (GPT-OSS): the same pairs, each angle once in cos and sin (…, d/2).
- "pairs" (Cohere, Cohere 2): adjacent dimensions (0, 1), (2, 3)… pair; each angle twice in a
  row, [θ_0, θ_0, θ_1, θ_1 …].
- a complex tensor e^{iθ} (…, d/2) instead of (cos, sin) (Llama 4): adjacent pairs, each read as
  one complex number and multiplied by it.
"""

from __future__ import annotations

import torch

LAYOUTS = ("halves", "halves_once", "pairs")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): [x1, x2] -> [-x2, x1], the pairing used by Llama-family RoPE."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d): each adjacent pair (x0, x1) -> (-x1, x0), Cohere's pairing."""
    rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1)  # (..., d / 2, 2)
    return rotated.flatten(-2)  # (..., d)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "halves") -> torch.Tensor:
    """Rotate q or k (B, h, n, d_k) by position; cos and sin are (B, n, r) or (n, r), laid out as
    `layout` says (module docstring). In "halves", r < d_k is partial rotary (GPT-NeoX/Pythia,
    Phi): the first r dimensions turn, the others pass as they are."""
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B, 1, n, r), broadcast over heads
    if layout == "halves_once":  # written as GPT-OSS writes it: the same rounding
        first, second = x.chunk(2, dim=-1)  # (B, h, n, d_k / 2) each
        return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
    if layout == "pairs":
        return x * cos + rotate_pairs(x) * sin
    r = cos.shape[-1]
    if r < x.shape[-1]:
        turned, kept = x[..., :r], x[..., r:]
        return torch.cat((turned * cos + rotate_half(turned) * sin, kept), dim=-1)
    return x * cos + rotate_half(x) * sin


def apply_complex_rotary(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotate q or k (B, h, n, d_k) by Llama 4's complex angles e^{iθ}, (B, n, d_k / 2): each
    adjacent pair is one complex number, multiplied by its angle (in float32, as Llama 4 does)."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (B, h, n, d_k / 2) complex
    if freqs.dim() == 3:
        freqs = freqs.unsqueeze(1)  # (B, 1, n, d_k / 2), broadcast over heads
    return torch.view_as_real(pairs * freqs).flatten(-2).type_as(x)  # (B, h, n, d_k)


def rotate_qk(q: torch.Tensor, k: torch.Tensor, rotary, layout: str | None = "halves"):
    """q and k turned by RoPE: `rotary` is (cos, sin) in `layout`, or a complex tensor of angles;
    as they are when `rotary` is None or the layer has no RoPE (`layout` None: SmolLM3's and
    Llama 4's NoPE layers, Cohere 2's global ones, which are handed the angles all the same)."""
    if rotary is None or layout is None:
        return q, k
    if torch.is_tensor(rotary) and rotary.is_complex():
        return apply_complex_rotary(q, rotary), apply_complex_rotary(k, rotary)
    cos, sin = rotary  # (B, n, r) or (n, r) each
    return apply_rotary(q, cos, sin, layout), apply_rotary(k, cos, sin, layout)


def query_temperature(n: int, past: int, floor_scale: float, attn_scale: float, device=None) -> torch.Tensor:
    """Llama 4's query temperature on its NoPE layers (Nakanishi et al., 2025), (n, 1): the query
    at position p is multiplied by 1 + attn_scale · log(1 + ⌊(p + 1) / floor_scale⌋), so that
    far-apart keys are still told apart at long context. `past`: tokens already in the cache."""
    positions = torch.arange(n, device=device) + past  # (n,)
    return (torch.log1p(torch.floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0)[:, None]
