"""A causal LM's logits made apart from the forward: its LM head, logit scale and cap applied to the last
hidden state of its base model. A long run's lean capture runs the base model alone (SmolLM2's logits over
8,192 tokens would be 1.6 GB at once); with this, what the model predicts there is read a block of rows at a
time. Checked once per model on a probe against the model's own logits, so that a model that does anything
else between its base model and its logits is never read wrongly (None for it)."""

from __future__ import annotations

import weakref
from typing import Callable

import torch
from torch import nn

from mha_viz_models.output_head import output_head
from mha_viz_models.reading.readout import logit_multiplier, rebuild_tolerance, soft_cap

Logits = Callable[[torch.Tensor], torch.Tensor]  # last hidden states (..., d) -> logits (..., vocabulary)

_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> its Logits or None


def base_of(hf_model: nn.Module) -> nn.Module | None:
    """The model under the LM head (`base_model`), or None for a model that is its own base (no LM head)."""
    net = getattr(hf_model, "base_model", None)
    return None if net is None or net is hf_model else net


def find(hf_model: nn.Module, probe: torch.Tensor) -> Logits | None:
    """The model's logits as a function of its base model's last hidden state, or None when there is no LM
    head, no base model under it, or the rebuild does not reproduce the model's logits on `probe` (1, n) ids."""
    head = output_head(hf_model)
    net = base_of(hf_model)
    if not isinstance(head, nn.Module) or net is None:
        return None
    scale = logit_multiplier(hf_model.config)  # Cohere's logit_scale, Granite's logits_scaling
    cap = getattr(hf_model.config, "final_logit_softcapping", None)
    cap = float(cap) if cap else None

    def logits(hidden: torch.Tensor) -> torch.Tensor:
        made = head(hidden)
        made = made if scale == 1 else made * scale
        return soft_cap(made, cap)

    with torch.inference_mode():
        own = hf_model(input_ids=probe, use_cache=False).logits.float()
        rebuilt = logits(net(input_ids=probe, use_cache=False).last_hidden_state).float()
    weight = next(head.parameters(), None)
    tol = 10 * rebuild_tolerance(own.dtype if weight is None else weight.dtype)
    return logits if rebuilt.shape == own.shape and torch.allclose(rebuilt, own, atol=tol, rtol=tol) else None


def of(loaded) -> Logits | None:
    """`find` for a loaded model on a two-token probe, once per model (kept while it lives), under its lock (the
    probe must meet no other session's hooks). Call the result under the model's lock too: a view's hook on the
    LM head (`ablation_outcome`) would change what it makes."""
    with loaded.lock:
        if loaded.hf_model not in _FOUND:
            _FOUND[loaded.hf_model] = find(loaded.hf_model, torch.tensor([[0, 1]], device=loaded.device))
        return _FOUND[loaded.hf_model]
