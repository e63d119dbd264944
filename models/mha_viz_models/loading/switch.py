"""Which attention a shared model runs for one forward that needs no probabilities: fused (our adapters without
weights, Hugging Face's SDPA), or the outputs a lean capture hands each layer (`reading.given`); then back to eager.
The caller holds the model's lock from the switch to the switch back.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager

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


@contextmanager
def fused(model):
    """Inside: `model` runs fused attention (`use_fused`; True where it could switch), eager again after. For a
    forward (or backward) that reads no probabilities: a head mask, a patch or a gradient at W_O's input is the
    same with either attention, and SDPA makes no n × n array a head (SmolLM2 at 4,096 tokens on 2 cores: 11 s
    against 41 s). The caller holds the model's lock. Nested inside another `fused` of the same model (a loss inside
    a fused pass), it leaves the switch to the outer one, which puts eager back."""
    if getattr(model.hf_model.config, "_attn_implementation", None) == "sdpa":
        yield True  # switched already, by an outer `fused`
        return
    switched = use_fused(model)
    try:
        yield switched
    finally:
        use_eager(model, switched)


_FUSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> whether `fused` switches it


def fuses(model) -> bool:
    """Whether `fused` runs `model` on SDPA: tried once a model, under its lock (a switch there and back), and
    remembered. False for our MHA (its adapters skip their weights, but a memory estimate stays on the eager side)."""
    if model.local_attention:
        return False
    known = _FUSES.get(model.hf_model)
    if known is None:
        with model.lock, fused(model) as known:
            pass
        _FUSES[model.hf_model] = known
    return known


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
