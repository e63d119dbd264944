"""Switching heads off: Michel et al.'s head mask ξ on a loaded model.

While `head_mask` is active, every head's output z_h (its slice of W_O's input) becomes
`ξ_h · z_h + (1 − ξ_h) · μ_h` before W_O: ξ_h = 1 keeps the head, ξ_h = 0 removes it (μ_h = 0,
zero-ablation) or replaces it by its mean output (mean-ablation, μ_h given). ξ may be a
continuous tensor that requires grad: ∂L/∂ξ_h is then Michel et al.'s head importance.
It works for every architecture whose W_O mha-viz can find (BERT, GPT-2 and Llama families,
and models computed by our MHA), with Hugging Face's attention or ours.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from mha_viz_models.families.builtin import output_projection
from mha_viz_models.reading.hooks import layer_pre_hooks


@contextmanager
def head_mask(loaded, scale: torch.Tensor, means: torch.Tensor | None = None,
              record: list | None = None):
    """scale: ξ, (layers, heads), or (B, layers, heads) for a batch of B rows each under its own mask (row b of
    every layer's input scaled by scale[b]); means: μ, (layers, heads, d_v) or None (zero-ablation).
    record: if a list, each layer's (z, masked z), both (B, n, H, d_v), are appended to it in
    layer order (for gradients with respect to the heads' outputs). The caller holds
    `loaded.lock`."""
    if not loaded.attention_modules:
        raise ValueError(f"The heads of '{loaded.name}' cannot be switched off: mha-viz cannot find "
                         "where its heads' outputs meet W_O.")
    H = loaded.num_heads
    if scale.dim() not in (2, 3) or tuple(scale.shape[-2:]) != (len(loaded.attention_modules), H):
        raise ValueError(f"the head mask must have shape {(len(loaded.attention_modules), H)}, or a batch of "
                         f"those; got {tuple(scale.shape)}")

    def hook_for(layer: int):
        def mask(_module, args):
            x = args[0]  # (B, n, H · d_v): the heads' outputs side by side
            z = x.reshape(*x.shape[:-1], H, -1)  # (B, n, H, d_v)
            if scale.dim() == 3 and (z.dim() != 4 or z.shape[0] != scale.shape[0]):
                raise ValueError(f"a batch of {scale.shape[0]} head masks needs the heads' outputs batch first, "
                                 f"(B, n, H · d_v); layer {layer} of '{loaded.name}' gives {tuple(x.shape)}")
            xi = scale[..., layer, :].to(device=z.device, dtype=z.dtype)  # (H,) or (B, H), on this layer's device
            xi = xi[:, None] if xi.dim() == 1 else xi[:, None, :, None]  # (H, 1) or (B, 1, H, 1)
            out = z * xi
            if means is not None:
                mu = means[layer][..., :z.shape[-1]]  # (H, d_v) over tokens (a smaller head's: its own d_v)
                out = out + (1 - xi) * mu.to(device=z.device, dtype=z.dtype)
            if record is not None:
                record.append((z, out))
            return (out.reshape(x.shape), *args[1:])
        return mask

    hooks = layer_pre_hooks([output_projection(m, fam) for m, fam in loaded.attention_modules], hook_for)
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
