"""One forward of a decoder in which every receiver of `edge_graph` reads its own copy of the stream:
each query head's q, each KV head's k and v, each MLP and the logits read the stream plus a correction
of their own (a provider's `inputs`), and each sender's write is handed to the provider as the run
makes it (`sender`). What the providers add makes the methods of circuits:

- `Leaves`: zero corrections that require a gradient, so that ∂m/∂(a receiver's input) is each leaf's
  gradient (edge attribution patching), with the run's writes recorded;
- `Recorder`: nothing added, the run's writes recorded (a clean or a corrupted run);
- `Fixed`: one correction a batch row, into one receiver (path patching);
- `Mixed`: every receiver reads, for each sender, a blend of the sender's write in this run and a
  given one (a circuit: edges outside it carry the corrupted write).

The attention of each layer is computed by our MHA (`LoadedModel.layer_adapter`) from the per-receiver
inputs, through the layer's own norm, q/k norms and RoPE; with no correction it is the model's own
attention (`check`, run once a model on a probe, compares the logits and the writes' sum).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from mha_viz_models.reading import edge_graph, readout
from mha_viz_models.reading.edge_graph import EdgeGraph
from mha_viz_models.reading.verify import probe

__all__ = ["Fixed", "Leaves", "Mixed", "Recorder", "graph_of", "run"]


class Recorder:
    """Adds nothing; keeps the run's writes, detached: `writes()` is (B, S, n, d) in sender order."""

    def __init__(self, record: bool = True) -> None:
        self.record, self._kept = record, []

    def sender(self, start: int, writes: Callable[[], torch.Tensor]) -> None:
        if self.record:
            self._kept.append(writes().detach())

    def inputs(self, sl: slice, like: torch.Tensor) -> torch.Tensor | None:
        """The corrections of receivers `sl`, (B, R_sl, n, d), for a stream like `like`; None: none."""
        return None

    def writes(self) -> torch.Tensor:
        return torch.cat([w.to(self._kept[0].device) for w in self._kept], dim=1)


class Leaves(Recorder):
    """Zero corrections with a gradient, one (B, n, d) a receiver: `grads(m)` is ∂m/∂(each receiver's
    input), (B, R, n, d) float32."""

    def __init__(self, shape: tuple[int, int, int], dtype: torch.dtype, record: bool = True) -> None:
        super().__init__(record)
        self.shape, self.dtype, self._leaves = shape, dtype, []

    def inputs(self, sl: slice, like: torch.Tensor) -> torch.Tensor:
        B, n, d = self.shape
        leaf = torch.zeros(B, sl.stop - sl.start, n, d, dtype=self.dtype, device=like.device, requires_grad=True)
        self._leaves.append(leaf)
        return leaf

    def grads(self, m: torch.Tensor) -> torch.Tensor:
        found = torch.autograd.grad(m, self._leaves, allow_unused=True)
        device = self._leaves[0].device
        return torch.cat([(torch.zeros_like(leaf) if g is None else g).to(device)
                          for leaf, g in zip(self._leaves, found)], dim=1).float()


class Fixed(Recorder):
    """Batch row b adds `deltas[b]` (n, d) to what receiver `receivers[b]` reads; nothing else changes.
    Every receiver takes its own input path (zero where nothing is added), so that rows round alike."""

    def __init__(self, receivers: list[int], deltas: torch.Tensor, record: bool = False) -> None:
        super().__init__(record)
        self.receivers, self.deltas = np.asarray(receivers), deltas

    def inputs(self, sl: slice, like: torch.Tensor) -> torch.Tensor:
        B, n, d = self.deltas.shape
        out = torch.zeros(B, sl.stop - sl.start, n, d, dtype=self.deltas.dtype, device=like.device)
        rows = np.flatnonzero((self.receivers >= sl.start) & (self.receivers < sl.stop))
        if rows.size:
            out[torch.as_tensor(rows), torch.as_tensor(self.receivers[rows] - sl.start)] = self.deltas[
                torch.as_tensor(rows)].to(like.device)
        return out


class Mixed(Recorder):
    """Receiver r of batch row b reads the stream of this run plus Σ_s w[b, s, r] · (given[s] − the
    run's write of s): w = 1 puts the given write (the corrupted run's) in place of this run's."""

    def __init__(self, g: EdgeGraph, weights: torch.Tensor, given: torch.Tensor) -> None:
        super().__init__(record=False)
        self.g, self.weights, self.given = g, weights, given  # (B, S, R), (S, n, d)
        B, (_, n, d), R = weights.shape[0], given.shape, weights.shape[2]
        self.acc = torch.zeros(B, R, n, d, dtype=torch.float32, device=given.device)  # sums of many writes

    def sender(self, start: int, writes: Callable[[], torch.Tensor]) -> None:
        w = writes()  # (B, S_g, n, d)
        stop = start + w.shape[1]
        first = int(np.argmax(self.g.receiver_order > self.g.sender_order[start]))  # later receivers: a suffix
        diff = self.given[start:stop].to(w.device, torch.float32) - w.float()
        self.acc[:, first:] += torch.einsum("bsnd,bsr->brnd", diff,
                                            self.weights[:, start:stop, first:].to(diff)).to(self.acc.device)

    def inputs(self, sl: slice, like: torch.Tensor) -> torch.Tensor:
        return self.acc[:, sl]


def _per_head(linear: torch.nn.Linear, x: torch.Tensor, width: int) -> torch.Tensor:
    """x (B, R, n, d), one input a head, through that head's rows of `linear`: (B, R, n, width)."""
    R = x.shape[1]
    out = torch.einsum("brnd,rkd->brnk", x, linear.weight.view(R, width, -1))
    return out if linear.bias is None else out + linear.bias.view(R, 1, width)


def _split_qkv(mha, norm, x: torch.Tensor, delta: torch.Tensor, H: int, G: int):
    """q (B, H, n, d_k), k (B, G, n, d_k), v (B, G, n, d_v), each head from its own input x + delta[:, r]."""
    inp = x[:, None] + delta.to(x)  # (B, H + 2G, n, d)
    normed = norm(inp) if norm is not None else inp
    q = _per_head(mha.w_q, normed[:, :H], mha.d_k)
    k = _per_head(mha.w_k, normed[:, H:H + G], mha.d_k)
    v = _per_head(mha.w_v, normed[:, H + G:], mha.d_v)
    if mha.q_norm is not None:
        q = mha.q_norm(q)
    if mha.k_norm is not None:
        k = mha.k_norm(k)
    return q, k, v


def _head_writes(mha, z: torch.Tensor) -> torch.Tensor:
    """Each head's write z_h W_O[h] (B, H, n, d) from z (B, H, n, d_v), no bias."""
    H, d_v = z.shape[1], z.shape[3]
    return torch.einsum("bhnv,dhv->bhnd", z, mha.w_o.weight.view(-1, H, d_v))


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def run(loaded, g: EdgeGraph, provider, *, input_ids: torch.Tensor, last_only: bool = True) -> torch.Tensor:
    """Logits (B, k, vocab) of one forward (k = 1 where the model can make the last position's only
    and `last_only`) with the receivers' inputs corrected by `provider` and its writes handed to it.
    Call under `loaded.lock`: the model's attention forwards are swapped for this run."""
    state: dict = {}
    H, G = g.num_heads, g.num_kv_heads

    def block_pre(layer):
        def hook(_m, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            state[layer] = x
            if layer == 0:
                provider.sender(0, lambda: x[:, None])
        return hook

    def attention(parts):
        layer, adapter = parts.layer, loaded.layer_adapter(parts.layer)
        mha = adapter.mha

        def forward(*args, **kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            x = state[layer] = state[layer].to(hidden.device)  # a model spread over devices: this layer's
            delta = provider.inputs(g.attention_receivers(layer), x)
            rotary = adapter.rotary(kwargs)
            if delta is None:
                q, k, v = mha.project_self(hidden, rotary)
            else:
                q, k, v = _split_qkv(mha, parts.attn_norm, x, delta, H, G)
                q, k = mha.positioned(q, k, rotary)
            z, _ = mha.attend(q, k, v, is_causal=True, need_weights=False)
            out = mha.merge(z)
            state[("attn", layer)] = out
            provider.sender(g.head_senders(layer).start, lambda: _head_writes(mha, z))
            return out, None
        return forward

    def mlp_pre(parts):
        def hook(_m, args, kwargs):
            i = g.mlp_receiver(parts.layer)
            x = state[parts.layer]
            delta = provider.inputs(slice(i, i + 1), x)
            if delta is None:
                return None
            read = (x if parts.parallel else x + state[("attn", parts.layer)].to(x)) + delta[:, 0].to(x)
            new = parts.mlp_norm(read) if parts.mlp_norm is not None else read
            if args:
                return (new, *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": new}
        return hook

    def mlp_post(parts):
        def hook(_m, _args, out):
            provider.sender(g.mlp_sender(parts.layer), lambda: _first(out)[:, None])
        return hook

    def final_pre(_m, args):
        i = g.logits_receiver
        x = args[0]
        delta = provider.inputs(slice(i, i + 1), x)
        if delta is None:
            return None
        return (x + delta[:, 0, -x.shape[1]:].to(x), *args[1:])

    hooks, swapped = [], []
    try:
        for p in g.layers:
            hooks.append(p.block.register_forward_pre_hook(block_pre(p.layer), with_kwargs=True))
            swapped.append((p.attention, p.attention.__dict__.get("forward")))  # an instance forward, if any
            p.attention.forward = attention(p)
            if p.mlp is not None:
                hooks.append(p.mlp.register_forward_pre_hook(mlp_pre(p), with_kwargs=True))
                hooks.append(p.mlp.register_forward_hook(mlp_post(p)))
        hooks.append(g.final.register_forward_pre_hook(final_pre))
        kwargs = dict(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), use_cache=False)
        if last_only and readout.keeps_last_logits(loaded.hf_model):
            kwargs["logits_to_keep"] = 1
        return loaded.hf_model(**kwargs).logits
    finally:
        for h in hooks:
            h.remove()
        for module, before in swapped:
            if before is None:
                del module.forward  # the class's forward again
            else:
                module.forward = before


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return float((a - b).abs().amax()) / (1 + float(b.abs().amax()))


def logits_gap(gap: float, dtype: torch.dtype, layers: int) -> str:
    """Why the split run is refused when its logits differ from the model's by `gap` (relative): in half
    precision, where float32 splits the same model (SmolLM2 in bfloat16: 0.15), what to do about it."""
    said = f"its attention computed head by head gives other logits (a gap of {gap:.2g}"
    if dtype == torch.float32:
        return said + ")"
    name = str(dtype).removeprefix("torch.")
    return (said + f" in {name}, whose rounding over {layers} layers can alone give that much): pick float32 in "
            "the sidebar's Precision (or load the model with dtype=\"float32\") for its edges")


def check(loaded, g: EdgeGraph) -> str | None:
    """None when a split run with every receiver given its own (zero) correction makes the model's own
    logits and its writes add up to the last stream; otherwise what differs."""
    ids = probe(loaded.hf_model.config.vocab_size, loaded.device)
    tol = 1e-3 if loaded.dtype == torch.float32 else 5e-2
    last: list = []
    with loaded.lock, torch.inference_mode():
        plain = loaded.hf_model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[:, -1:]
        zeros = Fixed([-1], torch.zeros(1, ids.shape[1], loaded.d_model, dtype=loaded.dtype), record=True)
        hook = g.final.register_forward_pre_hook(lambda _m, args: last.append(args[0].detach()))
        try:
            split = run(loaded, g, zeros, input_ids=ids)[:, -1:]
        except (torch.OutOfMemoryError, MemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - a layer shaped otherwise than the split expects: the reason
            return f"a forward with each receiver's own input failed ({type(exc).__name__}: {str(exc)[:160]})"
        finally:
            hook.remove()
    if (gap := _gap(split, plain.to(split.device))) > tol:
        return logits_gap(gap, loaded.dtype, len(g.layers))
    end = last[0].device
    total = zeros.writes().to(end).sum(1)  # (1, n, d): the embedding, every head's and every MLP's write
    biases = [loaded.layer_adapter(p.layer).mha.w_o.bias for p in g.layers]  # W_O's bias: in no head's write
    biases = sum(b.detach().to(end) for b in biases if b is not None)
    if _gap(total + biases, last[0]) > tol:
        return "its stream is not the sum of the embedding's, the heads' and the MLPs' writes"
    return None


def graph_of(loaded) -> EdgeGraph:
    """The model's `EdgeGraph`, checked once on a probe (`check`); UnsupportedArchitecture names why not."""
    return edge_graph.graph(loaded, check)
