"""Checks at load that mha-viz reproduces a model's attention, whatever its family: our MHA in
place of the model's own (*Compute with our MHA*), and the per-layer recompute behind lean
capture, the teaching steps and the queries-and-keys view (Hugging Face's attention). A family
that looks like one we know but computes something else (interleaved rotary, layers without
rotary, a bias we do not add) is caught here on a short probe, instead of showing wrong numbers.

In float32 the two computations must agree within `TOLERANCE`. In half precision no single number
can tell rounding from a wrong layout: a peaked head of a large model moves by a tenth between two
correct computations, a near-uniform one by 1e-3. So each layer is checked on its own
(`LayerCheck`): our MHA and Hugging Face's attention, both in the model's precision on the input
that layer received in the probe, and the same two on a float32 copy of that one layer, on that
input widened. The float32 copy must agree within `TOLERANCE` (else the layout is wrong, whatever
the precision), and the half-precision gap may exceed the float32 copy's by `ROUNDING` times the
rounding that layer shows (how far Hugging Face's half-precision probabilities are from its float32
copy's), never more."""

from __future__ import annotations

import copy
import dataclasses
import logging

import torch
from torch import nn

from mha_viz_models.attention.heads import output_problem, values_problem
from mha_viz_models.device.placement import resident_copy
from mha_viz_models.device.precision import as_probabilities
from mha_viz_models.errors import ModelLoadError, UnsupportedArchitecture
from mha_viz_models.families.adapters import call_rotary
from mha_viz_models.families.builtin import find_attention, make_adapter, output_projection
from mha_viz_models.reading.hooks import distinct
from mha_viz_models.reading.records import Capture, LayerInput, first_tensor

TOLERANCE = 1e-4  # float32 rounding stays below 1e-5 (tests); a wrong rotary or mask is far above
# Our half-precision probabilities p and Hugging Face's q are both roundings of what a float32 copy of
# the layer gives (p32 within TOLERANCE of q32): |p − q| <= |p − p32| + |p32 − q32| + |q32 − q|. The last
# term is the layer's measured rounding r; the first is ours, which takes the same steps in the same
# precision, so is of r's size: 2 r covers the two, and one more r our rounding at other places than
# Hugging Face's (a float32 softmax kept, not rounded back). A wrong layout moves a peaked row by far more.
ROUNDING = 3.0
FLOOR = TOLERANCE  # where the layer barely rounds (near-uniform rows), float32's own margin
HEADS_ROUNDING = 4  # check_heads' relative tolerance in half precision, in units of the dtype's epsilon
PROBE_TOKENS = 16
log = logging.getLogger("mha_viz.models")


def tolerance(dtype: torch.dtype) -> float:
    """`check_heads`' relative tolerance: W_O applied to the heads' outputs (and each head's attention
    over its values) against what the model wrote, relative to the largest entry. float32:
    `TOLERANCE`; half precision: `HEADS_ROUNDING` units of its rounding (bfloat16 0.031, float16 0.0039),
    where a W_O read wrongly is off by the size of the output itself."""
    return TOLERANCE if dtype == torch.float32 else HEADS_ROUNDING * torch.finfo(dtype).eps


@dataclasses.dataclass(frozen=True)
class LayerCheck:
    """One layer's verdict in half precision (module docstring). gap: our MHA against Hugging Face's
    attention in the model's precision; gap32: the same on a float32 copy of the layer; rounding: how far
    Hugging Face's half-precision probabilities are from its float32 copy's."""

    gap: float
    gap32: float
    rounding: float

    @property
    def bound(self) -> float:
        """The largest `gap` that is still this layer's rounding."""
        return self.gap32 + ROUNDING * self.rounding + FLOOR

    @property
    def layout_differs(self) -> bool:
        """Whether even the float32 copy disagrees: a wrong layout, not rounding."""
        return not self.gap32 <= TOLERANCE  # NaN counts as differing

    @property
    def ok(self) -> bool:
        return not self.layout_differs and self.gap <= self.bound


def first_failure(checks: list[LayerCheck]) -> tuple[int, LayerCheck] | None:
    """(layer, its check) of the first layer whose gap is more than rounding; None when every layer passes."""
    return next(((i, c) for i, c in enumerate(checks) if not c.ok), None)


def explain(layer: int, check: LayerCheck, precision: str) -> str:
    """Why layer `layer` fails, in words: a float32 copy that disagrees too is a layout mha-viz does not
    follow (its rotary positions, masks or biases); one that agrees is rounding beyond what the layer shows."""
    if check.layout_differs:
        return (f"layer {layer} is {check.gap:.2g} away from the model's own on a test input in {precision}, and "
                f"{check.gap32:.2g} in a float32 copy of that layer: its rotary positions, masks or biases differ "
                "from the families mha-viz knows")
    return (f"layer {layer} is {check.gap:.2g} away from the model's own on a test input in {precision}, more than "
            f"that layer's rounding explains ({check.bound:.2g}; a float32 copy of it agrees within "
            f"{check.gap32:.1g}): our MHA rounds differently from the model's own in {precision}")


def probe(vocab_size: int, device) -> torch.Tensor:
    """(1, 16) token ids, long enough that rotary angles and local windows differ between positions."""
    return (torch.arange(1, PROBE_TOKENS + 1) % max(int(vocab_size), 2))[None].to(device)


def eager_attentions(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's probabilities from Hugging Face's own (eager) attention, before any swap."""
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True, use_cache=False)
    return [a.detach().float() for a in (out.attentions or ())]


# a row of probabilities sums to at most 1, up to rounding (a sink's share leaves it below): float32's, and a half
# precision's (each probability rounded to 8 bits: a row's sum moves by up to 2⁻⁸ ≈ 0.004)
ROWS_PAST_ONE = {torch.float32: 1e-3, torch.bfloat16: 0.02, torch.float16: 0.02}


def not_probabilities(attentions: list[torch.Tensor], n: int, dtype: torch.dtype = torch.float32, *,
                      sinks: bool = False) -> str | None:
    """Why the probe's attention, per layer (1, H, n, n: a compressed layer's entries split off), is not
    softmax probabilities over its n tokens, in plain words; None where it is. What a layer returns otherwise (a
    window's weights, chunks, scores) cannot be drawn as rows over the tokens. `dtype`: what the model computed in
    (its rounding); `sinks`: the model has learned sink logits (GPT-OSS), which may take a whole row in a half
    precision."""
    slack = ROWS_PAST_ONE.get(dtype, 0.02)
    for layer, a in enumerate(attentions):
        if a.dim() != 4 or a.shape[-2] != n or a.shape[-1] != n:
            return (f"returns its attention as an array of shape {tuple(a.shape)} for {n} tokens (in chunks, over a "
                    "window or without heads), not one row a query over the tokens")
        sums = a.float().sum(-1)
        if bool((a < -slack).any()) or bool((sums > 1 + slack).any()):
            return (f"returns attention weights that are not probabilities (in layer {layer}, rows from "
                    f"{float(sums.min()):.2g} to {float(sums.max()):.2g}, or weights below 0)")
        empty = sums <= 0  # a query that gives no token any weight (CPM-Ant masks weights after its softmax)
        if bool(empty.all()) or (bool(empty.any()) and not sinks):
            return (f"returns rows that give no token any weight (in layer {layer}, {int(empty.sum())} of "
                    f"{sums.numel()} rows: every weight 0)")
    return None


def worst_gap(reference: list[torch.Tensor], other: list[torch.Tensor]) -> tuple[int, float]:
    """(layer, largest absolute difference) between two per-layer lists of probabilities; an
    infinite gap when they do not even have the same layers or shapes."""
    if len(reference) != len(other) or not reference:
        return -1, float("inf")
    gaps = [gap(a, b) for a, b in zip(reference, other)]
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
    (`mha_viz_models.attention.heads`): W_O applied to the recorded heads' outputs z must be what the W_O layer wrote,
    and, where values are read off the model's own modules, each head's output must be its attention
    over them. Returns (the model with what could not be read switched off and said, the probe's
    probabilities per layer in float32)."""
    written: list[torch.Tensor] = []
    layers = loaded.attention_modules
    watch = [(p, lambda _m, _i, out: written.append(first_tensor(out).detach()))
             for p in distinct([output_projection(m, fam) for m, fam in layers])]
    cap = loaded.capture(ids, inputs=True, watch=watch)
    eager = [a.float() for a in cap.attentions]
    if not layers:
        return loaded, eager
    if cap.head_outputs is None or len(written) != len(layers):
        return dataclasses.replace(loaded, attention_modules=[], unread=(
            "its heads' outputs could not be recorded at the input of each layer's output projection")), eager
    for layer, (module, fam) in enumerate(layers):
        w_o = resident_copy(output_projection(module, fam))
        own = getattr(w_o, "in_features", None)  # the layer's own heads' width (Gemma 4's z is padded past it)
        z = cap.head_outputs[layer] if own is None else cap.head_outputs[layer][..., :own // loaded.num_heads]
        why = output_problem(z, written[layer], w_o, tol)
        if why is not None:
            return dataclasses.replace(loaded, attention_modules=[],
                                       unread=f"in layer {loaded.layer_ids[layer]}, {why}"), eager
    for layer in range(len(layers)):
        path = loaded.value_path(layer)
        raw = None if cap.values is None else cap.values[layer]
        if path is None or raw is None:
            continue
        v = path.split(raw)
        why = values_problem(cap.head_outputs[layer][..., :v.shape[-1]], cap.attentions[layer], v, tol)
        if why is not None:
            return dataclasses.replace(loaded, reads_values=False,
                                       unread=f"in layer {loaded.layer_ids[layer]}, {why}"), eager
    return loaded, eager


# --- half precision, one layer at a time -------------------------------------------------------
@dataclasses.dataclass
class Call:
    """One call of an attention module in the probe: the module, its arguments as the model passed
    them, and the probabilities it returned (float32 rows, as a capture shows them); `probs32`: those
    of a float32 copy of the module on the same arguments widened, when asked for."""

    module: nn.Module
    args: tuple
    kwargs: dict
    probs: torch.Tensor
    probs32: torch.Tensor | None = None


def reference_calls(model: nn.Module, modules: list[nn.Module], ids: torch.Tensor, *,
                    float32: bool = False) -> list[Call]:
    """Run the probe `ids` once through `model` (eager attention, probabilities returned), recording
    each call of `modules` in the order the model makes them; with `float32`, each call's module is
    then copied to float32, one at a time, and run again on its arguments widened (`Call.probs32`)."""
    calls: list[Call] = []
    pending: list[tuple[nn.Module, tuple, dict]] = []

    def before(module, args, kwargs):
        pending.append((module, args, kwargs))

    def after(_module, _args, output):
        module, args, kwargs = pending.pop()
        calls.append(Call(module, args, kwargs, as_probabilities(returned_probabilities(output).detach())))

    hooks = [m.register_forward_pre_hook(before, with_kwargs=True) for m in distinct(modules)]
    hooks += [m.register_forward_hook(after) for m in distinct(modules)]
    try:
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    for call in calls if float32 else ():
        call.probs32 = _run(float32_copy(call.module), call)  # one float32 copy at a time
    return calls


def adapter_checks(loaded, calls: list[Call]) -> list[LayerCheck]:
    """Each layer's `LayerCheck` for a model whose attention our MHA computes (local attention): the
    adapter in layer l's place, run on what Hugging Face's own layer l was handed in the probe
    (`reference_calls` before the swap, with `float32`), and a float32 copy of that adapter on it widened."""
    if len(calls) != loaded.num_layers:
        return [LayerCheck(float("inf"), float("inf"), 0.0)]
    checks = []
    for call, (adapter, _) in zip(calls, loaded.attention_modules):
        with torch.inference_mode():
            ours = returned_probabilities(adapter(*call.args, **call.kwargs))
        ours32 = _run(float32_copy(adapter), call)
        checks.append(LayerCheck(gap(ours, call.probs), gap(ours32, call.probs32), gap(call.probs, call.probs32)))
    return checks


def recompute_checks(loaded, ids: torch.Tensor) -> list[LayerCheck]:
    """Each layer's `LayerCheck` for the per-layer recompute (`LoadedModel.recompute`: lean capture, the
    teaching steps, queries and keys) against Hugging Face's attention, on the input each layer received in
    an eager run of the probe; in float32 on a copy of that one layer (Hugging Face's module, and our
    adapter built over the copy), made, used and dropped before the next layer's."""
    calls = reference_calls(loaded.hf_model, [m for m, _ in loaded.attention_modules], ids)
    if len(calls) != loaded.num_layers:
        return [LayerCheck(float("inf"), float("inf"), 0.0)]
    config, checks = loaded.hf_model.config, []
    for layer, (call, (module, family)) in enumerate(zip(calls, loaded.attention_modules)):
        recorded = Capture(None, None, None, None, layer_inputs=(None,) * layer + (_input(call.module, call.args,
                           call.kwargs),), attention_mask=torch.ones_like(ids))
        ours = loaded.recompute(recorded, layer)
        loaded.forget_views()  # a fused layout's copies of its rows: one layer's at a time
        wide = float32_copy(module)
        hf32 = _run(wide, call)
        mha = make_adapter(wide, family, config, causal=loaded.is_causal).mha
        inp = _input(wide, widened(call.args), widened(call.kwargs))
        with torch.inference_mode():
            q, k, v = mha.project_self(inp.hidden, inp.position_embeddings)
            _, ours32 = mha.attend(q, k, v, is_causal=loaded.is_causal)
        del wide, mha
        checks.append(LayerCheck(gap(ours, call.probs), gap(ours32, hf32), gap(call.probs, hf32)))
    return checks


def own_attention(model: nn.Module) -> list[nn.Module]:
    """The model's own attention modules, before our MHA takes their place (none where no family knows them)."""
    try:
        return [module for _, _, module, _ in find_attention(model)]
    except UnsupportedArchitecture:
        return []


def half_verdict(loaded, spec: str, calls: list[Call] | None, ids: torch.Tensor):
    """The load check in half precision (`verify.LayerCheck`): each layer of our MHA against Hugging Face's
    attention on that layer's input, within the rounding a float32 copy of the layer shows. `calls`: Hugging
    Face's layers as the probe called them before our MHA took their place (local attention), else None
    (the per-layer recompute is checked). Refuses local attention that fails; otherwise says why our MHA
    does not stand in."""
    try:
        checks = adapter_checks(loaded, calls) if calls is not None else recompute_checks(loaded, ids)
    except Exception:  # noqa: BLE001 - a layout our MHA cannot follow on a layer's own input
        log.warning("'%s': the per-layer check of our MHA failed to run", spec, exc_info=True)
        checks = None
    failed = (-1, None) if checks is None else first_failure(checks)
    if checks:
        log.info("'%s' in %s, per layer (gap, bound): %s", spec, loaded.precision,
                 [(f"{c.gap:.2g}", f"{c.bound:.2g}") for c in checks])
    if failed is None:
        return loaded
    layer, check = failed
    why = "its layers do not run on their own inputs" if check is None else explain(
        loaded.layer_ids[layer] if 0 <= layer < loaded.num_layers else layer, check, loaded.precision)
    if calls is not None:
        instead = "" if check is None or check.layout_differs else ", or load it in float32"
        raise ModelLoadError(f"Our MHA does not reproduce the attention of '{spec}' ({loaded.model_type}): {why}. "
                             f"Use Hugging Face's attention for this model{instead}.")
    log.warning("'%s': our MHA does not stand in: %s", spec, why)
    return dataclasses.replace(loaded, stand_in=f"our MHA does not reproduce the attention of "
                                                f"'{loaded.model_type}' ({why})")


def float32_copy(module: nn.Module) -> nn.Module:
    """A float32 copy of one attention module (its weights loaded where accelerate offloads them)."""
    resident = resident_copy(module)
    with torch.no_grad():
        return (resident if resident is not module else copy.deepcopy(module)).float()


def widened(value):
    """`value` with every floating-point tensor in it (in tuples, lists and dicts) made float32."""
    if torch.is_tensor(value):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(widened(v) for v in value)
    if isinstance(value, dict):
        return {k: widened(v) for k, v in value.items()}
    return value


def returned_probabilities(output) -> torch.Tensor:
    """The probabilities (B, H, n, n) in what an attention module returned: its last 4-d tensor
    ((output, probabilities) for most; T5's (output, position bias, probabilities))."""
    return next(t for t in reversed(output) if torch.is_tensor(t) and t.dim() == 4)


def _run(wide: nn.Module, call: Call) -> torch.Tensor:
    """The probabilities (float32) of `wide`, a float32 copy of an attention module, on `call`'s arguments widened."""
    with torch.inference_mode():
        return returned_probabilities(wide(*widened(call.args), **widened(call.kwargs))).float()


def _input(module: nn.Module, args: tuple, kwargs: dict) -> LayerInput:
    """What lean capture records of a call of `module`: the hidden states, and RoPE as our MHA applies it."""
    hidden = args[0] if args else kwargs["hidden_states"]
    return LayerInput(hidden, call_rotary(module, {**kwargs, "_hidden": hidden}))


def gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest absolute difference between two probability tensors; infinite when their shapes differ."""
    return float((a.float() - b.float()).abs().max()) if a.shape == b.shape else float("inf")
