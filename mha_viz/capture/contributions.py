"""Contributions at any length (`docs/attribution.md`): ‖f_h(x_j)‖, what key j writes through head h, for a
long run that has none (`long_value_norms`: one forward with fused attention, each layer's values read as
its input arrives, no probabilities; (layers, heads, n) floats: SmolLM2 at 8,192 tokens holds 8.8 MB), kept
on the run once computed (`value_norms_of`: sessions are threads that share a cached run), and a block of
rows turned into row-normalised contributions (`weighed`: what `attribution.value_weighted` does to every
head, and a long run's lens to a block, `mha_viz.derived`)."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import torch

from mha_viz.budget.plan import Plan, forward_bytes, on_device
from mha_viz_models import LoadedModel
from mha_viz_models.reading import values
from mha_viz_models.reading.records import Capture

_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # run -> the lock its norms are made under
_GUARD = threading.Lock()  # guards the table


def weighed(rows: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """float32 (h, b, n): rows (h, b, n) times each key's norm through its head, norms (h, n), each row divided
    by its sum (a row with nothing to divide stays 0)."""
    c = rows * norms[:, None, :].astype(np.float32)
    sums = c.sum(-1, keepdims=True)
    out = np.zeros_like(c, dtype=np.float32)
    np.divide(c, sums, out=out, where=sums > 0)
    return out


def can_read(model: LoadedModel) -> bool:
    """Whether `long_value_norms` reads this model: our MHA computes its layers (their inputs give the values)."""
    return bool(model.can_recompute) and not model.is_encoder_decoder


def long_value_norms(model: LoadedModel, token_ids: list[int]) -> np.ndarray:
    """float32 (layers, heads, n): ‖f_h(x_j)‖ of every head and token from one forward with fused attention,
    each layer's input taken as it arrives and dropped (`values.value_norms`), no probabilities made. Equal to
    a dense capture's `value_norms` within float32 rounding. ValueError where `can_read` is False."""
    if not can_read(model):
        raise ValueError(f"the value path of {model.name} is read from its own attention, not at this length")
    out = np.zeros((model.num_layers, model.num_heads, len(token_ids)), dtype=np.float32)

    def arrived(layer: int, inp) -> None:
        one = Capture(None, None, None, None, layer_inputs={layer: inp}, attention_mask=None)
        out[layer] = values.value_norms(model, one, layer)[0].float().cpu().numpy()
    model.capture(torch.tensor([list(token_ids)]), lean=True, head_outputs=False, on_input=arrived)
    out.setflags(write=False)
    return out


def norms_bytes(layers: int, heads: int, n: int) -> int:
    """What a run's value norms hold: float32 (layers, heads, n)."""
    return 4 * layers * heads * n


def plan_value_norms(run, model: LoadedModel) -> Plan[np.ndarray | None]:
    """`value_norms_of(run, model)` planned (`budget.plan`): on the run's tokens (read already), its need one forward
    with fused attention where the model runs (each layer's values read and let go as it arrives) and the norms kept
    on the host (`norms_bytes`); where the run has them, their reading, with nothing to admit (`Plan.admit`)."""
    n = run.n
    if run.value_norms is not None:
        return Plan(n, None, lambda: run.value_norms, admit=False)
    need = on_device(model, forward_bytes(model, n), kept=norms_bytes(model.num_layers, model.num_heads, n))
    return Plan(n, need, lambda: value_norms_of(run, model))


def value_norms_of(run, model: LoadedModel) -> np.ndarray | None:
    """The run's `value_norms`, computed once (`long_value_norms` of its tokens) and kept on the run where it
    has none; two threads asking at once compute them once. None where the model's are not read here."""
    if run.value_norms is not None:
        return run.value_norms
    if not can_read(model):
        return None
    with _GUARD:
        lock = _LOCKS.setdefault(run, threading.Lock())
    with lock:
        if run.value_norms is None:
            run.value_norms = long_value_norms(model, run.token_ids)
    return run.value_norms
