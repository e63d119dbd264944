"""One forward that records what patching reads, every head's output z (W_O's input) and the logits, with fused
attention (`switch.fused`): no layer's probabilities are made, where an eager capture (`LoadedModel.capture`)
makes every layer's (B, H, n, n)."""

from __future__ import annotations

import torch

from mha_viz_models.families.builtin import output_projection
from mha_viz_models.loading import switch
from mha_viz_models.reading.hooks import distinct
from mha_viz_models.reading.records import Capture, z_recorder


def z_hooks(model, zs: list) -> list:
    """Forward pre-hooks that append every head's output z (B, H, n, d_v) to `zs` as each W_O of `model` (a
    LoadedModel) reads it, in the order the layers run: one hook a module (ALBERT's is every layer's). The caller
    registers them inside the model's lock and removes them."""
    keep_z = z_recorder(zs, model.num_heads)
    return [proj.register_forward_pre_hook(keep_z)
            for proj in distinct([output_projection(m, fam) for m, fam in model.attention_modules])]


def head_outputs_run(model, input_ids: torch.Tensor) -> Capture:
    """A Capture of `input_ids` (B, n) by `model` (a LoadedModel) with `head_outputs` (per layer (B, H, n, d_v),
    as an eager capture records them) and `output` (the model's, with its logits); no `attentions`, no `hidden`.
    Takes the model's lock."""
    input_ids = input_ids.to(model.device)
    mask = torch.ones_like(input_ids)
    zs: list[torch.Tensor] = []
    with model.lock, torch.inference_mode(), switch.fused(model):
        hooks = z_hooks(model, zs)
        try:
            out = model.hf_model(input_ids=input_ids, attention_mask=mask, use_cache=False)
        finally:
            for h in hooks:
                h.remove()
    return Capture(None, None, tuple(zs), out, None, mask)
