"""The nodes and edges of a decoder's residual stream, for circuits of heads: who writes the stream
(`senders`: the embedding, each head's z_h W_O[h], each MLP) and who reads it (`receivers`: each
query head's q input, each KV head's k and v inputs, each MLP's input, the logits' input), with
the modules a run splits them at (`graph`, found once a model and checked on a probe by
`mha_viz_models.reading.split_run`).

A sender reaches a receiver when it writes before the receiver reads: the heads of a layer reach
its MLP in a sequential block, not in a parallel one (GPT-J, Cohere), where the MLP reads the layer's
input as the attention does. Families whose heads' writes pass a norm before they join the stream
(Gemma 2 and 3, OLMo 2) or whose layer is a post-norm one (BERT) have no write of a head's own in
the stream, and are refused by name (`UnsupportedArchitecture`).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
from torch import nn

from mha_viz_models.device.placement import has_offloaded
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.reading import readout, stream
from mha_viz_models.reading.readout import is_norm
from mha_viz_models.reading.verify import probe

__all__ = ["EdgeGraph", "LayerParts", "Receiver", "graph"]


@dataclass(frozen=True)
class Receiver:
    """One input that reads the stream: `input` is "q", "k", "v", "mlp" or "logits"; `index` the
    query head (q), the KV head (k, v), or -1."""

    name: str
    layer: int  # the attention layer (L for the logits)
    input: str
    index: int = -1


@dataclass
class LayerParts:
    """The modules of layer `layer` that a split run hooks."""

    layer: int
    block: nn.Module
    attention: nn.Module  # the model's attention module: its forward is replaced during a split run
    attn_norm: nn.Module | None  # between the stream and q, k, v (None: the stream itself)
    mlp: nn.Module | None  # its output is the MLP's write (None: attention only)
    mlp_norm: nn.Module | None = None  # between the stream and the MLP (None: the stream itself)
    parallel: bool = False  # the MLP reads the layer's input, not the stream after the attention


@dataclass
class EdgeGraph:
    """Senders and receivers in the order a forward meets them, and which sender reaches which; where each
    layer's senders and receivers start in those lists is recorded as they are made (`_nodes`)."""

    model_name: str
    num_heads: int
    num_kv_heads: int
    layers: list[LayerParts]
    final: nn.Module  # the final norm (or the LM head itself, where there is no final norm)
    senders: list[str]
    receivers: list[Receiver]
    sender_order: np.ndarray  # (S,) the step each sender writes at
    receiver_order: np.ndarray  # (R,) the step each receiver reads at
    head_start: dict[int, int] = field(default_factory=dict)  # layer -> index of its first head sender
    mlp_sender_at: dict[int, int] = field(default_factory=dict)  # layer -> index of its MLP sender
    attention_start: dict[int, int] = field(default_factory=dict)  # layer -> index of its first q receiver
    mlp_receiver_at: dict[int, int] = field(default_factory=dict)  # layer -> index of its MLP receiver

    @property
    def allowed(self) -> np.ndarray:
        """(S, R) bool: sender s writes before receiver r reads."""
        return self.sender_order[:, None] < self.receiver_order[None, :]

    @property
    def edge_count(self) -> int:
        return int(self.allowed.sum())

    def head_senders(self, layer: int) -> slice:
        start = self.head_start[layer]
        return slice(start, start + self.num_heads)

    def mlp_sender(self, layer: int) -> int | None:
        return self.mlp_sender_at.get(layer)

    def attention_receivers(self, layer: int) -> slice:
        """The receivers of layer `layer`'s attention: H q, then G k, then G v."""
        start = self.attention_start[layer]
        return slice(start, start + self.num_heads + 2 * self.num_kv_heads)

    def mlp_receiver(self, layer: int) -> int | None:
        return self.mlp_receiver_at.get(layer)

    @property
    def logits_receiver(self) -> int:
        return len(self.receivers) - 1

    @cached_property
    def _sender_of(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.senders)}

    @cached_property
    def _receiver_of(self) -> dict[str, int]:
        return {r.name: i for i, r in enumerate(self.receivers)}

    def sender_index(self, name: str) -> int:
        try:
            return self._sender_of[name]
        except KeyError:
            raise KeyError(f"{self.model_name} has no sender {name!r}: senders are 'embed', 'L{{l}}H{{h}}' "
                           f"and 'L{{l}} MLP'") from None

    def receiver_index(self, name: str) -> int:
        found = self._receiver_of.get(name)
        if found is None:
            kv = "'L{l}KV{g}.k' or '.v'" if self.num_kv_heads != self.num_heads else "'L{l}H{h}.k' or '.v'"
            raise KeyError(f"{self.model_name} has no receiver {name!r}: receivers are 'L{{l}}H{{h}}.q', {kv}, "
                           "'L{l} MLP' and 'logits'")
        return found


def _nodes(name: str, parts: list[LayerParts], H: int, G: int, final: nn.Module) -> EdgeGraph:
    g = EdgeGraph(name, H, G, parts, final, ["embed"], [], np.zeros(0), np.zeros(0))
    s_order, r_order = [0], []
    for p in parts:
        layer, step = p.layer, 2 * p.layer + 1  # the attention reads at 2l + 1; its heads write at 2l + 1
        g.attention_start[layer] = len(g.receivers)
        for kind, count in (("q", H), ("k", G), ("v", G)):
            head = "KV" if G != H and kind != "q" else "H"  # k and v of grouped-query attention: the KV head's
            g.receivers += [Receiver(f"L{layer}{head}{i}.{kind}", layer, kind, i) for i in range(count)]
            r_order += [step] * count
        g.head_start[layer] = len(g.senders)
        g.senders += [f"L{layer}H{h}" for h in range(H)]
        s_order += [step] * H
        if p.mlp is not None:  # a sequential MLP reads after the heads wrote (2l + 2), a parallel one with them
            g.mlp_receiver_at[layer], g.mlp_sender_at[layer] = len(g.receivers), len(g.senders)
            g.receivers.append(Receiver(f"L{layer} MLP", layer, "mlp"))
            r_order.append(step if p.parallel else step + 1)
            g.senders.append(f"L{layer} MLP")
            s_order.append(step + 1)
    g.receivers.append(Receiver("logits", len(parts), "logits"))
    r_order.append(2 * len(parts) + 2)
    g.sender_order, g.receiver_order = np.asarray(s_order), np.asarray(r_order)
    return g


_GRAPHS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> its EdgeGraph
_LOCK = threading.Lock()


def refuse(loaded, why: str) -> UnsupportedArchitecture:
    return UnsupportedArchitecture(f"The edges between the heads of '{loaded.name}' cannot be split: {why}.")


def graph(loaded, check) -> EdgeGraph:
    """The model's `EdgeGraph`, found once (kept while the model lives) and accepted only when
    `check(loaded, graph)` (a probe run through it) returns None; otherwise refused with its reason.
    UnsupportedArchitecture names why a family is refused."""
    with _LOCK:
        kept = _GRAPHS.get(loaded.hf_model)
    if kept is not None:
        return kept
    if not loaded.is_causal or loaded.is_encoder_decoder:
        raise refuse(loaded, "it is not a decoder")
    if any(has_offloaded(m) for m, _ in loaded.attention_modules):
        raise refuse(loaded, "some of its weights are offloaded to the CPU or disk (load it on one device, or "
                             "give it more memory)")
    try:
        lays = stream.layout(loaded)
    except UnsupportedArchitecture as exc:
        raise refuse(loaded, str(exc).split(": ", 1)[-1].rstrip(".")) from None
    for lay in lays:
        if lay.post_ln:
            raise refuse(loaded, "its layers normalise the stream after each write (post-norm)")
        if lay.post_norm is not None:
            raise refuse(loaded, f"layer {lay.layer}'s heads write through one norm over all of them before the "
                                 "stream, so no head has a write of its own")
        mha = loaded.layer_adapter(lay.layer).mha
        if mha.q_norm is not None and mha.norm_over_heads:
            raise refuse(loaded, "its q and k norms mix the heads")
        for name in ("w_q", "w_k", "w_v", "w_o"):
            if not isinstance(getattr(mha, name), nn.Linear):
                raise refuse(loaded, f"layer {lay.layer}'s {name} is not a linear layer")
    ro = readout.of(loaded)
    if ro is None:
        raise refuse(loaded, "its logits are not read off the last stream through one norm and a linear head")
    parts = _parts(loaded, lays)
    _find_mlp_norms(loaded, parts)
    found = _nodes(loaded.name, parts, loaded.num_heads, loaded.num_kv_heads, ro.norm)
    problem = check(loaded, found)
    if problem:
        raise refuse(loaded, problem)
    with _LOCK:
        _GRAPHS[loaded.hf_model] = found
    return found


def _weighted_mlp(lay):
    """The layout with its MLP, not a dropout after it: the layout takes the first child whose output is the
    rest of the layer's write, which in GPT-NeoX is `post_mlp_dropout` (the same tensor in eval mode)."""
    if lay.mlp is None or any(True for _ in lay.mlp.parameters()):
        return lay
    found = next((c for n, c in lay.block.named_children() if any(k in n for k in ("mlp", "feed_forward", "ffn"))
                  and any(True for _ in c.parameters())), None)
    return lay if found is None else dataclasses.replace(lay, mlp=found)


def _parts(loaded, lays) -> list[LayerParts]:
    """Each layer's modules: the attention's input norm from the stream layout, the MLP (the last
    layer's by the name the others' have) and the norm in front of it, the one among the block's norms
    that is not the attention's (a parallel block may share one: found by the probe check)."""
    lays = [_weighted_mlp(lay) for lay in lays]
    names = [next((n for n, c in lay.block.named_children() if c is lay.mlp), None) for lay in lays]
    mlp_name = next((n for n in names if n is not None), None)
    parts = []
    for lay in lays:
        mlp = lay.mlp
        if mlp is None and mlp_name is not None and lay.layer == len(lays) - 1:
            mlp = getattr(lay.block, mlp_name, None)
        if mlp is not None and is_norm(mlp):
            raise refuse(loaded, f"layer {lay.layer} writes its MLP through a norm")
        attn_norm = lay.input_fit.norm if lay.input_fit is not None else None
        parts.append(LayerParts(lay.layer, lay.block, loaded.attention_modules[lay.layer][0], attn_norm, mlp))
    return parts


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return float((a - b).abs().amax()) / (1 + float(b.abs().amax())) if a.shape == b.shape else float("inf")


def _find_mlp_norms(loaded, parts: list[LayerParts]) -> None:
    """On a probe: which of a block's norms made its MLP's input, and whether it read the layer's input
    (a parallel block) or the stream after the attention's write (sequential), whichever is closer."""
    seen: dict = {}
    ids = probe(loaded.hf_model.config.vocab_size, loaded.device)

    def keep(key, output=False):
        def hook(_m, args, *out):
            t = out[-1] if output else (args[0] if args else None)
            seen[key] = (t[0] if isinstance(t, tuple) else t).detach() if t is not None else None
        return hook

    def keep_norm(layer):
        return lambda mod, args, out: seen.setdefault(("norms", layer), []).append((mod, args[0].detach(),
                                                                                    out.detach()))
    with loaded.lock, torch.inference_mode():
        hooks = []
        for p in parts:
            hooks.append(p.block.register_forward_pre_hook(
                lambda _m, args, kwargs, layer=p.layer: seen.__setitem__(("x", layer), (
                    args[0] if args else kwargs["hidden_states"]).detach()), with_kwargs=True))
            hooks.append(p.attention.register_forward_hook(keep(("attn", p.layer), output=True)))
            if p.mlp is not None:
                hooks.append(p.mlp.register_forward_pre_hook(keep(("mlp", p.layer))))
                hooks += [m.register_forward_hook(keep_norm(p.layer)) for m in p.block.modules() if is_norm(m)]
        try:
            loaded.hf_model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
        finally:
            for h in hooks:
                h.remove()
    for p in parts:
        if p.mlp is None:
            continue
        mlp_in, a = seen.get(("mlp", p.layer)), seen[("attn", p.layer)]
        x = seen[("x", p.layer)].to(a.device)  # a model spread over devices: the block's input moves in it
        if mlp_in is None:
            raise refuse(loaded, f"layer {p.layer}'s MLP takes no tensor input")
        read = mlp_in
        if _gap(mlp_in, x) > 1e-3 and _gap(mlp_in, x + a) > 1e-3:  # not the stream itself: through a norm
            reader = next(((m, r) for m, r, out in seen.get(("norms", p.layer), []) if _gap(out, mlp_in) <= 1e-3),
                          None)
            if reader is None:
                raise refuse(loaded, f"layer {p.layer}'s MLP reads the stream through something other than one norm")
            p.mlp_norm, read = reader
        p.parallel = _gap(read, x) < _gap(read, x + a)
