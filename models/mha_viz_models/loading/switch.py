"""Which attention a shared model runs for one forward that needs no probabilities: fused (our adapters without
weights, Hugging Face's SDPA), or the outputs a lean capture hands each layer (`reading.given`); then back to eager.
The caller holds the model's lock from the switch to the switch back.
"""

from __future__ import annotations

from mha_viz_models.reading import given


def use_fused(model) -> bool:
    """Switch `model` (a LoadedModel) to fused attention; `use_eager` with the result afterwards. A model whose
    Hugging Face code has no SDPA path (Gemma 2: soft-capping) stays on eager, which computes the same (False)."""
    for a in model.adapters:
        a.need_weights = False
    if model.local_attention:
        return False
    try:
        model.hf_model.set_attn_implementation("sdpa")
    except (ValueError, ImportError):  # e.g. "does not support … scaled_dot_product_attention"
        return False
    return True


def use_given(model) -> bool:
    """Switch `model` to the attention outputs handed to it (`reading.given`), as `use_fused` does to SDPA."""
    for a in model.adapters:
        a.need_weights = False
    given.register()
    model.hf_model.set_attn_implementation(given.GIVEN)
    return True


def use_eager(model, switched: bool) -> None:
    """Undo `use_fused` or `use_given` (`switched`: what it returned)."""
    for a in model.adapters:
        a.need_weights = True
    if switched:
        model.hf_model.set_attn_implementation("eager")
