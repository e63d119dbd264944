"""The residual stream read as a sum of writes: where each layer's attention reads the stream, what
its heads and the rest of its layer write back, and through which norms (`layout`, found once a model
on a short probe and checked there), and what one run of a text records for splitting it (`record`), at
the positions asked for.

Two layouts are read:
- additive (GPT-2, Llama and its relatives, Qwen3, Gemma 2 and 3, OLMo 2): a layer adds its attention's
  write (through a post-attention norm where the model has one) and one module's output, the MLP's (or
  the norm after it), to the stream: stream_{l+1} = stream_l + attention write + MLP write;
- post-norm (BERT, MiniLM, RoBERTa): stream_{l+1} = LN_o(LN_a(stream_l + attention) + MLP).
Each is checked on the probe against the model's own hidden states; a layer that is neither is
refused by name (`UnsupportedArchitecture`), never split wrongly.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import torch
from torch import nn

from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.families.builtin import output_projection
from mha_viz_models.reading.hooks import distinct
from mha_viz_models.reading.readout import Norm, fit, is_norm
from mha_viz_models.reading.records import LayerInput, input_hooks
from mha_viz_models.reading.verify import probe

__all__ = ["LayerLayout", "StreamRecord", "layout", "record", "slice_rotary"]


@dataclass(frozen=True)
class LayerLayout:
    """How layer `layer` (an index into `LoadedModel.attention_modules`) reads and writes the stream.

    input_fit: the norm between the stream and the attention's input (None: it reads the stream);
    post_norm: the norm between the attention's output and the stream (Gemma 2 and 3, OLMo 2);
    mlp: the module whose output is the rest of an additive layer's write (None: the last layer's,
    never read, or a post-norm layer); attn_norm, out_norm: a post-norm layer's two norms;
    q_norm, k_norm: the norms on q and k (Qwen3, Gemma 3: each head's; OLMo 2: over all heads)."""

    layer: int
    block: nn.Module
    w_o: nn.Module
    input_fit: Norm | None = None
    post_norm: Norm | None = None
    mlp: nn.Module | None = None
    attn_norm: Norm | None = None
    out_norm: Norm | None = None
    q_norm: Norm | None = None
    k_norm: Norm | None = None

    @property
    def post_ln(self) -> bool:
        return self.attn_norm is not None


@dataclass
class StreamRecord:
    """What one run records for splitting the stream, batch row 0, in the model's dtype on its device:
    per layer the stream entering its block (`stream`, (n, d)), the attention's input (`inputs`: the
    `LayerInput`s of lean capture, RoPE included), the heads' outputs z ((H, n, d_v)), W_O's output
    ((n, d)), the MLP's write ((n, d), None where not recorded) and a post-norm layer's LN_a input and
    output and LN_o input."""

    stream: list[torch.Tensor]
    inputs: list
    z: list[torch.Tensor]
    attn_out: list[torch.Tensor]
    mlp: list[torch.Tensor | None]
    norm_io: dict[tuple[int, str], torch.Tensor] = field(default_factory=dict)
    positions: torch.Tensor | None = None  # the positions kept, ascending (None: every position)

    def local(self, positions: torch.Tensor) -> torch.Tensor:
        """The rows of this record's tensors that hold `positions` of the text."""
        return positions if self.positions is None else torch.searchsorted(self.positions, positions)


_LAYOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> its layers' layouts
_LOCK = threading.Lock()
# One discovery at a time: the sessions that ask for a model's layout at once (a class arriving on a server just
# started, each opening the Head view's *Why here?*) wait for the first one's probe instead of each running its own
# (9 % of the server's work for 100 students at once, stop 98)
_DISCOVERING = threading.Lock()


def block_of(model: nn.Module, module: nn.Module) -> nn.Module:
    """The layer of a `ModuleList` (a decoder or encoder layer) that holds `module`."""
    name = next((n for n, m in model.named_modules() if m is module), None)
    parts = (name or "").split(".")
    for cut in range(len(parts) - 1, 0, -1):
        if parts[cut - 1].isdigit():
            return model.get_submodule(".".join(parts[:cut]))
    raise UnsupportedArchitecture("its attention layers do not sit in a list of layers")


def _refusal(loaded) -> str | None:
    if loaded.is_encoder_decoder:
        return "an encoder–decoder's stream is read by cross-attention too"
    if not loaded.can_recompute:
        return f"mha-viz cannot recompute its attention ({loaded.stand_in or loaded.unread})"
    if loaded.layer_numbers or loaded.other_layers:
        return "its layers without softmax attention write into the stream in ways mha-viz does not split"
    if len(distinct([m for m, _ in loaded.attention_modules])) != len(loaded.attention_modules):
        return "its layers share one attention module"
    return None


def layout(loaded) -> list[LayerLayout]:
    """Each layer's `LayerLayout`, found once per model on a short probe (and kept while the model
    lives), however many sessions ask at once. Raises UnsupportedArchitecture naming why a model's stream cannot be
    split exactly."""
    with _LOCK:
        kept = _LAYOUTS.get(loaded.hf_model)
    if kept is not None:
        return kept
    reason = _refusal(loaded)
    if reason:
        raise UnsupportedArchitecture(f"The scores of '{loaded.name}' cannot be split into what wrote them: {reason}.")
    with _DISCOVERING:
        with _LOCK:
            kept = _LAYOUTS.get(loaded.hf_model)  # found by a session that asked first, while this one waited
        if kept is None:
            kept = _discover(loaded)
            with _LOCK:
                _LAYOUTS[loaded.hf_model] = kept
    return kept


def _gap(a: torch.Tensor, b: torch.Tensor, scale: torch.Tensor | None = None) -> float:
    """The largest |a − b| relative to 1 + the largest |b| (or |scale|, the stream a difference was taken
    from) at the same position: massive activations at one position set no tolerance at the others."""
    a, b = a.float(), b.float()
    if a.shape != b.shape:
        return float("inf")
    size = (b if scale is None else scale.float()).abs().amax(-1, keepdim=True)
    return float(((a - b).abs() / (1 + size)).amax())


def _tolerance(dtype: torch.dtype) -> float:
    """The largest `_gap` that is still the rounding of `dtype`."""
    return 1e-4 if dtype == torch.float32 else 3e-2


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, scale: torch.Tensor | None = None) -> bool:
    """Equal within the rounding of `dtype` (`_gap`)."""
    return _gap(a, b, scale) <= _tolerance(dtype)


def _norm_calls(blocks: list[nn.Module], calls: list):
    """Forward hooks appending (block index, module, input, output) of every norm inside each block."""
    def hook_for(i):
        return lambda mod, args, out: calls.append((i, mod, args[0].detach(), out.detach()))
    return [m.register_forward_hook(hook_for(i)) for i, b in enumerate(blocks) for m in b.modules() if is_norm(m)]


def _discover(loaded) -> list[LayerLayout]:
    model, dtype = loaded.hf_model, loaded.dtype
    modules = [m for m, _ in loaded.attention_modules]
    blocks = [block_of(model, m) for m in modules]
    w_os = [output_projection(m, fam) for m, fam in loaded.attention_modules]
    ids = probe(model.config.vocab_size, loaded.device)
    inputs, outs, calls, children = [], [], [], {}
    with loaded.lock, torch.inference_mode():
        hooks = input_hooks(loaded.attention_modules, inputs) + _norm_calls(blocks, calls)
        hooks += [w.register_forward_hook(lambda _m, _a, out: outs.append(out.detach())) for w in w_os]
        for b in blocks:
            hooks += [child.register_forward_hook(lambda mod, _a, out: children.__setitem__(id(mod), _first(out)))
                      for child in b.children()]
        try:
            hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True,
                           use_cache=False).hidden_states
        finally:
            for h in hooks:
                h.remove()
    if hidden is None or len(hidden) != len(blocks) + 1 or len(inputs) != len(blocks) or len(outs) != len(blocks):
        raise UnsupportedArchitecture(f"The scores of '{loaded.name}' cannot be split: its layers' hidden states "
                                      "are not one a layer")
    found = []
    for layer, (block, w_o) in enumerate(zip(blocks, w_os)):
        s, x, o = hidden[layer][0], inputs[layer].hidden[0], outs[layer][0]
        mine = [(mod, r[0], out[0]) for i, mod, r, out in calls if i == layer]
        parts = {"layer": layer, "block": block, "w_o": w_o}
        if not _close(x, s, dtype):
            reader = next(((m, r, out) for m, r, out in mine if _close(r, s, dtype) and _close(out, x, dtype)), None)
            norm = None if reader is None else fit(*reader)
            if norm is None:
                raise _unsplit(loaded, layer, "its attention reads the stream through something other than one norm")
            parts["input_fit"] = norm
        post = next(((m, r, out) for m, r, out in mine if r.shape == o.shape and _close(r, o, dtype)), None)
        write = o
        if post is not None:
            parts["post_norm"] = fit(*post)
            if parts["post_norm"] is None:
                raise _unsplit(loaded, layer, f"the norm after its attention ({type(post[0]).__name__}) cannot be read")
            write = post[2]
        qk = _qk_norms(loaded, layer, inputs[layer].hidden)  # before the rest: a refused q/k path is the reason
        if layer + 1 < len(blocks):
            parts.update(_rest(loaded, layer, block, s, write, hidden[layer + 1][0], children, mine))
        found.append(LayerLayout(**parts, **qk))
    return found


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _rest(loaded, layer, block, s, write, nxt, children, mine) -> dict:
    """What the layer writes besides its attention: one child module's output (additive), or a post-norm
    layer's two norms."""
    dtype, rest = loaded.dtype, nxt.float() - s.float() - write.float()
    if _close(rest, torch.zeros_like(rest), dtype, scale=nxt):  # attention only (toy-induction)
        return {}
    gaps = [(_gap(out[0], rest, scale=nxt), i, child) for i, child in enumerate(block.children())
            if torch.is_tensor(out := children.get(id(child)))]
    if gaps and (best := min(gaps, key=lambda g: g[:2]))[0] <= _tolerance(dtype):
        return {"mlp": best[2]}  # the closest: a small write could be within rounding of another module's
    attn = next(((m, r, out) for m, r, out in mine if _close(r, (s.float() + write.float()).to(r.dtype), dtype)), None)
    last = next(((m, r, out) for m, r, out in mine if _close(out, nxt, dtype)), None)
    if attn is not None and last is not None and attn[0] is not last[0]:
        a, b = fit(*attn), fit(*last)
        if a is not None and b is not None:
            return {"attn_norm": a, "out_norm": b}
    raise _unsplit(loaded, layer, "its update is neither the stream plus its attention's and one module's writes "
                                  "nor a post-norm layer's")


def _qk_norms(loaded, layer: int, x: torch.Tensor) -> dict:
    """The q and k norms of a layer fitted on the probe's projections (per head, or over all heads)."""
    mha = loaded.layer_adapter(layer).mha
    if mha.rotated_norm is not None or mha.temperature is not None:
        raise _unsplit(loaded, layer, "its queries pass a norm after RoPE or a temperature")
    found = {}
    with torch.inference_mode():
        for name, linear, norm, heads in (("q_norm", mha.w_q, mha.q_norm, mha.num_heads),
                                          ("k_norm", mha.w_k, mha.k_norm, mha.num_kv_heads)):
            if norm is None:
                continue
            with loaded.lock:  # the model's own norm module: another session's hooks may sit on it
                r = linear(x)  # (B, n, heads · d_k)
                r = r if mha.norm_over_heads else r.view(*r.shape[:-1], heads, mha.d_k)
                found[name] = fit(norm, r, norm(r))
            if found[name] is None:
                raise _unsplit(loaded, layer, f"its {name} ({type(norm).__name__}) cannot be read")
    return found


def _unsplit(loaded, layer: int, why: str) -> UnsupportedArchitecture:
    return UnsupportedArchitecture(f"The scores of '{loaded.name}' cannot be split into what wrote them: layer "
                                   f"{layer}: {why}.")


class _Enough(Exception):
    """Raised inside the forward once every layer `record` reads has run: the rest is never computed."""


def _stop(_module, _args):
    raise _Enough


def slice_rotary(pe, positions: torch.Tensor | None):
    """RoPE's angles (cos, sin) ((B, n, r) or (n, r) each), or complex ones, at `positions` only."""
    if pe is None or positions is None:
        return pe

    def cut(t):
        return t[:, positions.to(t.device)] if t.dim() == 3 else t[positions.to(t.device)]
    return cut(pe) if torch.is_tensor(pe) else tuple(cut(t) for t in pe)


def record(loaded, input_ids: torch.Tensor, upto: int, positions: torch.Tensor | None = None) -> StreamRecord:
    """Run `input_ids` (1, n) once (fused attention, lean capture) recording what splitting the stream
    entering layers 0 … `upto` needs, at `positions` only (ascending; None: every position): a pair of
    tokens of a long text keeps two rows a layer, not n."""
    all_layers = layout(loaded)
    layers = all_layers[: upto + 1]
    stream, attn_out, mlp, inputs = [], [], {}, []
    norm_io: dict[tuple[int, str], torch.Tensor] = {}
    at = None if positions is None else positions.to(loaded.device)

    def rows(t: torch.Tensor) -> torch.Tensor:
        t = t[0].detach()
        return t if at is None else t[at]

    def keep(store, key):
        return lambda _m, _a, out: store.__setitem__(key, rows(_first(out)))

    def keep_io(layer, tag):
        def hook(_m, args, out):
            norm_io[(layer, tag + " in")], norm_io[(layer, tag + " out")] = rows(args[0]), rows(out)
        return hook

    def keep_input(layer, item: LayerInput) -> None:
        if layer <= upto:
            inputs.append(LayerInput(rows(item.hidden)[None], slice_rotary(item.position_embeddings, at)))

    zs: list[torch.Tensor] = []

    def keep_z(_m, args):  # W_O's input, the heads side by side: (p, H · d_v) -> (H, p, d_v)
        x = rows(args[0])
        zs.append(x.reshape(x.shape[0], loaded.num_heads, -1).transpose(0, 1))

    with loaded.lock:  # re-entered by capture: the hooks exist for this run only
        hooks = [lay.w_o.register_forward_pre_hook(keep_z) for lay in layers]
        hooks += [lay.block.register_forward_pre_hook(
            lambda _m, args, kwargs: stream.append(rows(args[0] if args else kwargs["hidden_states"])),
            with_kwargs=True) for lay in layers]
        hooks += [lay.w_o.register_forward_hook(lambda _m, _a, out: attn_out.append(rows(out))) for lay in layers]
        for lay in layers[:upto]:
            if lay.mlp is not None:
                hooks.append(lay.mlp.register_forward_hook(keep(mlp, lay.layer)))
            if lay.post_ln:
                hooks.append(lay.attn_norm.norm.register_forward_hook(keep_io(lay.layer, "attn_norm")))
                hooks.append(lay.out_norm.norm.register_forward_hook(keep_io(lay.layer, "out_norm")))
        if upto + 1 < len(all_layers):  # nothing after layer `upto` is read: the forward stops at the next block
            hooks.append(all_layers[upto + 1].block.register_forward_pre_hook(_stop))
        try:
            loaded.capture(input_ids, lean=True, head_outputs=False, on_input=keep_input)
        except _Enough:
            pass
        finally:
            for h in hooks:
                h.remove()
    n = len(layers)
    return StreamRecord(stream[:n], inputs[:n], zs, attn_out[:n], [mlp.get(i) for i in range(n)], norm_io,
                        None if positions is None else positions.cpu())
