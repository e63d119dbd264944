"""Checks at load that mha-viz reproduces a model's attention, whatever its family: our MHA in
place of the model's own (*Compute with our MHA*), and the per-layer recompute behind lean
capture, the teaching steps and the queries-and-keys view (Hugging Face's attention). A family
that looks like one we know but computes something else (interleaved rotary, layers without
rotary, a bias we do not add) is caught here on a short probe, instead of showing wrong numbers."""

from __future__ import annotations

import dataclasses

import torch

from mha_viz_models.families.builtin import output_projection
from mha_viz_models.loading.placement import resident_copy
from mha_viz_models.reading.heads import output_problem, values_problem
from mha_viz_models.reading.hooks import distinct

TOLERANCE = 1e-4  # float32 rounding stays below 1e-5 (tests); a wrong rotary or mask is far above
# bfloat16 keeps 8 bits: two computations that round the scores differently move a probability by a
# few 1e-3 on small models, and by up to 0.11 on the peaked heads of a random-init 8B shape (measured on
# an H200); a wrong rotary layout or mask moves them by more (the families' tests check it in float32)
HALF_TOLERANCE = 0.15
PROBE_TOKENS = 16


def tolerance(dtype: torch.dtype) -> float:
    """The largest gap between two computations of the same attention that is still rounding."""
    return TOLERANCE if dtype == torch.float32 else HALF_TOLERANCE


def probe(vocab_size: int, device) -> torch.Tensor:
    """(1, 16) token ids, long enough that rotary angles and local windows differ between positions."""
    return (torch.arange(1, PROBE_TOKENS + 1) % max(int(vocab_size), 2))[None].to(device)


def eager_attentions(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's probabilities from Hugging Face's own (eager) attention, before any swap."""
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True, use_cache=False)
    return [a.detach().float() for a in (out.attentions or ())]


def worst_gap(reference: list[torch.Tensor], other: list[torch.Tensor]) -> tuple[int, float]:
    """(layer, largest absolute difference) between two per-layer lists of probabilities; an
    infinite gap when they do not even have the same layers or shapes."""
    if len(reference) != len(other) or not reference:
        return -1, float("inf")
    gaps = [float((a.float() - b.float()).abs().max()) if a.shape == b.shape else float("inf")
            for a, b in zip(reference, other)]
    layer = max(range(len(gaps)), key=gaps.__getitem__)
    return layer, gaps[layer]


def recompute_gap(loaded, ids: torch.Tensor, eager: list[torch.Tensor]) -> tuple[int, float]:
    """How far lean capture's per-layer recompute is from `eager`, the eager capture of `ids`.
    One layer's adapter at a time: a fused layout's copies of its rows never all exist at once."""
    lean = loaded.capture(ids, lean=True)  # records each layer's input (its RoPE read by the adapters)
    loaded.forget_views()
    recomputed = []
    for layer in range(loaded.num_layers):
        recomputed.append(loaded.recompute(lean, layer))
        loaded.forget_views()
    return worst_gap(eager, recomputed)


def check_heads(loaded, ids: torch.Tensor, tol: float):
    """Run the probe once (eager capture) and check what mha-viz reads off each layer
    (`mha_viz_models.reading.heads`): W_O applied to the recorded heads' outputs z must be what the W_O layer wrote,
    and, where values are read off the model's own modules, each head's output must be its attention
    over them. Returns (the model with what could not be read switched off and said, the probe's
    probabilities per layer in float32)."""
    written: list[torch.Tensor] = []
    layers = loaded.attention_modules
    watch = [(p, lambda _m, _i, out: written.append(out.detach()))
             for p in distinct([output_projection(m, fam) for m, fam in layers])]
    cap = loaded.capture(ids, inputs=True, watch=watch)
    eager = [a.float() for a in cap.attentions]
    if not layers:
        return loaded, eager
    if cap.head_outputs is None or len(written) != len(layers):
        return dataclasses.replace(loaded, attention_modules=[], unread=(
            "its heads' outputs could not be recorded at the input of each layer's output projection")), eager
    for layer, (module, fam) in enumerate(layers):
        why = output_problem(cap.head_outputs[layer], written[layer], resident_copy(output_projection(module, fam)),
                             tol)
        if why is not None:
            return dataclasses.replace(loaded, attention_modules=[],
                                       unread=f"in layer {loaded.layer_ids[layer]}, {why}"), eager
    for layer in range(len(layers)):
        path = loaded.value_path(layer)
        raw = None if cap.values is None else cap.values[layer]
        if path is None or raw is None:
            continue
        why = values_problem(cap.head_outputs[layer], cap.attentions[layer], path.split(raw), tol)
        if why is not None:
            return dataclasses.replace(loaded, reads_values=False,
                                       unread=f"in layer {loaded.layer_ids[layer]}, {why}"), eager
    return loaded, eager
