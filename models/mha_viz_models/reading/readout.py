"""A decoder's read-out: the final norm and the unembedding that turn the last residual stream
into logits, found by watching a probe run (the last norm the model calls) and checked against
what that norm computed, so that a read-out mha-viz would reconstruct wrongly is never used.
Also the norms that sit between an attention layer's output and the residual stream (Gemma 2
and 3, OLMo 2: `post_norms`), which a head's write passes through on its way to the logits."""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass

import torch
from torch import nn

from mha_viz_models.device.placement import resident_copy
from mha_viz_models.output_head import output_head

LAYER, RMS, RMS_PLUS_ONE, NONE = "layernorm", "rmsnorm", "rmsnorm (1 + weight)", "none"


@dataclass(frozen=True)
class Norm:
    """norm(r) = (r − mean(r) if `kind` is LayerNorm) / σ · scale (+ bias): σ = √(var(r) + eps)
    for LayerNorm, √(mean(r²) + eps) for RMSNorm; its tensors on the CPU, in float32."""

    norm: nn.Module  # the norm module itself
    kind: str
    eps: float
    scale: torch.Tensor  # (d,) γ (Gemma's RMSNorm: 1 + its weight)
    bias: torch.Tensor | None  # (d,) β, LayerNorm only

    def sigma(self, r: torch.Tensor) -> torch.Tensor:
        """The norm's scale σ for residual vectors r (..., d)."""
        if self.kind == LAYER:
            return torch.sqrt(r.var(-1, unbiased=False, keepdim=True) + self.eps)
        if self.kind == NONE:
            return torch.ones_like(r[..., :1])
        return torch.sqrt(r.pow(2).mean(-1, keepdim=True) + self.eps)

    def frozen(self, write: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """A write into the residual (..., d) through the norm with σ frozen (no bias): what it adds to
        the normed stream."""
        centred = write - write.mean(-1, keepdim=True) if self.kind == LAYER else write
        return centred / sigma * self.scale.to(write)

    def reading(self, m: torch.Tensor) -> torch.Tensor:
        """Matrices m (..., d, k) that read the norm's output, its scale folded in (σ = 1, no bias):
        C diag(γ) m, C = I − 11ᵀ/d a LayerNorm's centring over the d rows, so x ↦ frozen(x, 1) @ m."""
        m = self.scale.to(m)[:, None] * m
        return m - m.mean(-2, keepdim=True) if self.kind == LAYER else m


@dataclass(frozen=True)
class Readout(Norm):
    """logits = unembed · norm(r) (+ unembed_bias): the final norm (`norm`: the LM head itself when
    `kind` is NONE) and the unembedding; then, where `softcap` is c (Gemma 2's
    final_logit_softcapping), capped: c · tanh(logits / c)."""

    unembed: torch.Tensor  # (vocab, d)
    unembed_bias: torch.Tensor | None  # (vocab,)
    softcap: float | None = None

    def uncapped(self, r: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The logits before any cap for residual vectors r (..., d): of the vocabulary's `rows` only when given."""
        u = self.unembed if rows is None else self.unembed[rows]
        normed = self.frozen(r, self.sigma(r)) + (0 if self.bias is None else self.bias)
        bias = self.unembed_bias if rows is None or self.unembed_bias is None else self.unembed_bias[rows]
        return normed @ u.T + (0 if bias is None else bias)

    def capped(self, logits: torch.Tensor) -> torch.Tensor:
        """What the model makes of uncapped logits: c · tanh(logits / c), or the logits themselves."""
        return soft_cap(logits, self.softcap)

    def slope(self, logits: torch.Tensor) -> torch.Tensor:
        """The cap's derivative at uncapped logits, 1 − tanh²(logits / c) (1 where nothing caps)."""
        return torch.ones_like(logits) if self.softcap is None else 1 - torch.tanh(logits / self.softcap) ** 2


def soft_cap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """A logit cap c (Gemma 2's final_logit_softcapping): c · tanh(logits / c); the logits themselves for None."""
    return logits if cap is None else cap * torch.tanh(logits / cap)


def _eps(norm: nn.Module) -> float:
    for name in ("eps", "variance_epsilon", "epsilon"):
        if isinstance(getattr(norm, name, None), (int, float)):
            return float(getattr(norm, name))
    raise ValueError(f"no epsilon on {type(norm).__name__}")


def find(hf_model: nn.Module, probe: torch.Tensor, *, through_cap: bool = False) -> Readout | None:
    """The read-out of a causal LM, or None when there is no linear one to reconstruct (no LM
    head, a final norm whose output the reconstruction does not reproduce, logit soft-capping
    unless `through_cap`: then the read-out carries the cap, checked like the rest)."""
    head = output_head(hf_model)
    cap = getattr(hf_model.config, "final_logit_softcapping", None)
    if not isinstance(head, nn.Linear) or (cap and not through_cap):
        return None
    softcap = float(cap) if cap else None
    calls: list[tuple[nn.Module, torch.Tensor, torch.Tensor]] = []
    read: list[torch.Tensor] = []  # what the LM head read
    norms = [m for m in hf_model.modules() if is_norm(m)]
    hooks = [m.register_forward_hook(lambda mod, args, out: calls.append((mod, args[0], out))) for m in norms]
    hooks.append(head.register_forward_pre_hook(lambda mod, args: read.append(args[0])))
    try:
        with torch.inference_mode():
            logits = hf_model(input_ids=probe).logits.float().cpu()
    finally:
        for h in hooks:
            h.remove()
    head = resident_copy(head)  # offloaded by accelerate: its weights, loaded
    # on the CPU, where attribution computes (a model on a GPU, or spread over several devices)
    multiplier = logit_multiplier(hf_model.config)  # Cohere's logit_scale, Granite's logits_scaling
    unembed = head.weight.detach().float().cpu() * multiplier
    unembed_bias = None if head.bias is None else head.bias.detach().float().cpu() * multiplier
    if not calls:  # no norm ran: the head reads the residual itself, unless a norm we do not know ran
        if not read or any("norm" in type(m).__name__.lower() for m in hf_model.modules()):
            return None
        ro = Readout(head, NONE, 0.0, torch.ones(unembed.shape[1]), None, unembed, unembed_bias, softcap)
        return ro if _reproduces(ro, read[-1].float().cpu(), logits, 10 * rebuild_tolerance(read[-1].dtype)) else None
    norm, r, out = calls[-1]  # the last norm before the LM head
    if not read or read[-1].shape != out.shape or not torch.equal(read[-1], out):
        return None  # the head does not read that norm's output: something else lies between
    tol = rebuild_tolerance(out.dtype)
    for fitted in _fits(norm, r, out):
        ro = Readout(**vars(fitted), unembed=unembed, unembed_bias=unembed_bias, softcap=softcap)
        if _reproduces(ro, r.float().cpu(), logits, 10 * tol):
            return ro
    return None


_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> {through_cap: read-out or None}


def of(loaded, *, through_cap: bool = False) -> Readout | None:
    """`find` for a loaded model, on a two-token probe, once per model (kept while it lives), under its lock:
    the probe's hooks must see no other session's forward."""
    with loaded.lock:
        found = _FOUND.setdefault(loaded.hf_model, {})
        if through_cap not in found:
            found[through_cap] = find(loaded.hf_model, torch.tensor([[0, 1]], device=loaded.device),
                                      through_cap=through_cap)
        return found[through_cap]


def keeps_last_logits(hf_model: nn.Module) -> bool:
    """Whether the model's forward can make the last position's logits only (`logits_to_keep`)."""
    return "logits_to_keep" in inspect.signature(hf_model.forward).parameters


def logit_multiplier(config) -> float:
    """What the model multiplies its LM head's output by: Cohere's `logit_scale`, 1 / Granite's
    `logits_scaling`; 1 for the others (`_reproduces` checks the read-out either way)."""
    scale = getattr(config, "logit_scale", None)
    divisor = getattr(config, "logits_scaling", None)
    return (float(scale) if isinstance(scale, (int, float)) else 1.0) / (
        float(divisor) if isinstance(divisor, (int, float)) and divisor else 1.0)


def fit(norm: nn.Module, r: torch.Tensor, out: torch.Tensor) -> Norm | None:
    """The first reading of `norm` (LayerNorm, RMSNorm, RMSNorm with 1 + weight) that turns its input r
    into what it computed, out; None when none does."""
    return next(_fits(norm, r, out), None)


def _fits(norm: nn.Module, r: torch.Tensor, out: torch.Tensor):
    """Each reading of `norm` (LayerNorm, RMSNorm, RMSNorm with 1 + weight) that turns its input r
    into what it computed, out (within the rounding of out's dtype)."""
    try:
        eps = _eps(norm)
    except ValueError:
        return
    resident = resident_copy(norm)  # offloaded by accelerate: its weights, loaded once
    own = getattr(resident, "weight", None)  # NanoChat's RMSNorm has none: a scale of 1
    weight = own.detach().float().cpu() if own is not None else torch.ones(r.shape[-1])
    tol = rebuild_tolerance(out.dtype)
    r32 = r.float().cpu()
    for kind, scale in ((LAYER, weight), (RMS, weight), (RMS_PLUS_ONE, 1 + weight)):
        if kind == LAYER and not _is_layer_norm(norm):
            continue
        own_bias = getattr(resident, "bias", None)
        bias = own_bias.detach().float().cpu() if kind == LAYER and own_bias is not None else None
        cand = Norm(norm, kind, eps, scale, bias)
        rebuilt = cand.frozen(r32, cand.sigma(r32)) + (0 if bias is None else bias)
        if torch.allclose(rebuilt, out.float().cpu(), atol=tol, rtol=tol):
            yield cand


def _is_layer_norm(module: nn.Module) -> bool:
    """PyTorch's LayerNorm, or a model's own that subtracts the mean (Cohere's, without a bias)."""
    return isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("LayerNorm")


def is_norm(module: nn.Module) -> bool:
    return _is_layer_norm(module) or type(module).__name__.endswith("RMSNorm")


class SeveralStreams(ValueError):
    """The layers that hold the attention pass several residual streams on (Gemma 3n's AltUp), mixed by coefficients
    computed from the streams themselves: a head's write reaches the logits along no linear path."""


def post_norms(hf_model: nn.Module, attentions: list[nn.Module], probe: torch.Tensor) -> list[Norm | None]:
    """For each layer's attention module (`attentions`, one a layer in call order), the norm that
    reads its output before the residual stream does (Gemma 2 and 3's and OLMo 2's
    post-attention norm), read off a probe run: the norm called on exactly the tensor the attention
    module returned; None for a layer whose output goes straight into the residual stream (a
    norm none of whose readings reproduces what it computed counts as one that cannot be read:
    `ValueError`; layers that take several streams, each (B, n, d) of a (streams, B, n, d) input: `SeveralStreams`)."""
    outputs: list[torch.Tensor] = []
    calls: list[tuple[nn.Module, torch.Tensor, torch.Tensor]] = []
    streams: list[int] = []  # the dimensions of what each attention module's parent layer takes
    distinct = list({id(m): m for m in attentions}.values())
    names = {id(m): n for n, m in hf_model.named_modules()}
    parents = [hf_model.get_submodule(names[id(m)].rpartition(".")[0]) for m in distinct if id(m) in names]
    hooks = [m.register_forward_hook(lambda _m, _a, out: outputs.append(out[0] if isinstance(out, tuple) else out))
             for m in distinct]
    hooks += [m.register_forward_hook(lambda mod, args, out: calls.append((mod, args[0], out)))
              for m in hf_model.modules() if is_norm(m)]
    hooks += [p.register_forward_pre_hook(lambda _m, args, kwargs: streams.append(_dims(args, kwargs)),
                                          with_kwargs=True) for p in parents if p is not hf_model]
    try:
        with torch.inference_mode():
            hf_model(input_ids=probe)
    finally:
        for h in hooks:
            h.remove()
    if any(d == 4 for d in streams):
        raise SeveralStreams("its layers pass several residual streams on (AltUp), mixed by coefficients computed "
                             "from the streams themselves, so a head's write reaches the logits along no linear path")
    found: list[Norm | None] = []
    for o in outputs[: len(attentions)]:
        reader = next(((mod, r, out) for mod, r, out in calls if r is o or (r.shape == o.shape and torch.equal(r, o))),
                      None)
        if reader is None:
            found.append(None)
            continue
        fitted = fit(*reader)
        if fitted is None:
            raise ValueError(f"the norm after attention layer {len(found)} ({type(reader[0]).__name__}) cannot be read")
        found.append(fitted)
    return found


def _dims(args: tuple, kwargs: dict) -> int:
    """The dimensions of the hidden states a layer was called with (0: none found)."""
    x = args[0] if args else kwargs.get("hidden_states")
    return x.dim() if isinstance(x, torch.Tensor) else 0


def rebuild_tolerance(dtype: torch.dtype) -> float:
    """How far a float32 rebuild may be from what the model computed in `dtype` (bfloat16 keeps 8
    bits; a wrong kind of norm, or a logit scale, is off by far more)."""
    return 1e-4 if dtype == torch.float32 else 2e-2


def _reproduces(ro: Readout, r: torch.Tensor, logits: torch.Tensor, tol: float = 1e-3) -> bool:
    """Whether the read-out turns the residual r (B, n, d) into the model's own logits (B, n, vocab):
    nothing after the head (a logit scale, a cap the read-out does not carry) that the reconstruction would miss."""
    rebuilt = ro.capped(ro.uncapped(r))
    return rebuilt.shape == logits.shape and torch.allclose(rebuilt, logits, atol=tol, rtol=tol)
