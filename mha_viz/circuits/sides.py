"""One side of a head's scores split into what wrote it: the query (or key) of head (layer, head) at some
positions as a sum of parts, one per write into the residual stream before that layer (the embeddings,
each earlier head, each MLP, the biases), each carried to W_Q (W_K) through every norm on its way with
that norm's scale frozen at this run's value, then through the q/k norm (frozen too) and RoPE.

Frozen norms are linear, and a scale σ frozen per position commutes with every matrix, so the whole way
from a write to the query is one (d_model, d_k) matrix and one divisor a position: a head's part is its
z (n, d_v) times a (d_v, d_k) matrix, never a (n, d_model) write."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_viz_models.attention.heads import output_blocks
from mha_viz_models.attention.rotary import rotate_qk
from mha_viz_models.reading.readout import Norm
from mha_viz_models.reading.stream import LayerLayout, StreamRecord, slice_rotary

F64 = torch.float64
ONE = torch.ones((), dtype=F64)  # a frozen σ of 1: a norm applied to weights, not to a position


@dataclass(frozen=True)
class Side:
    """names[p] and parts (P, len(positions), d_k), float64, after RoPE: Σ parts is the query (key)."""

    names: list[str]
    parts: torch.Tensor


def _rows(t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """(n, …) → (p, …) float64 on the CPU."""
    return t[positions.to(t.device)].to(F64).cpu()


def _sigma(norm: Norm, r: torch.Tensor) -> torch.Tensor:
    return norm.sigma(r.to(F64)).reshape(-1)  # (p,)


class _Reader:
    """The way from a write at some point of the stream to the projection: a matrix and a divisor a
    position for each point (`at(k)`: a write made before the k-th frozen norm of the chain)."""

    def __init__(self, end: torch.Tensor, end_div: torch.Tensor, chain: list[tuple[Norm, torch.Tensor]]) -> None:
        self.mats, self.divs = [end], [end_div]
        for norm, sigma in reversed(chain):
            self.mats.insert(0, norm.reading(self.mats[0]))
            self.divs.insert(0, sigma * self.divs[0])

    def at(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mats[k], self.divs[k]


def side(loaded, layouts: list[LayerLayout], rec: StreamRecord, layer: int, head: int, which: str,
         positions: torch.Tensor) -> Side:
    """The query (`which` "q", head `head`) or key ("k", KV head `head`) of `layer` at `positions`, split."""
    positions = rec.local(positions)  # the record's rows of those positions
    lay, mha = layouts[layer], loaded.layer_adapter(layer).mha
    linear, heads = (mha.w_q, mha.num_heads) if which == "q" else (mha.w_k, mha.num_kv_heads)
    d_k, cols = mha.d_k, slice(head * mha.d_k, (head + 1) * mha.d_k)
    w = linear.weight.detach()[cols].to(F64).cpu().T  # (d, d_k)
    b = None if linear.bias is None else linear.bias.detach()[cols].to(F64).cpu()
    # the q/k norm, frozen: σ from this run's projection (each head's, or all heads' together)
    qk_fit = lay.q_norm if which == "q" else lay.k_norm
    gamma, qk_div = torch.ones(d_k, dtype=F64), torch.ones(len(positions), dtype=F64)
    if qk_fit is not None:
        with torch.inference_mode():
            r = _rows(linear(rec.inputs[layer].hidden[0]), positions)  # (p, heads · d_k)
        over = mha.norm_over_heads
        qk_div = _sigma(qk_fit, r if over else r.view(len(positions), heads, d_k)[:, head])
        gamma = qk_fit.scale.to(F64)[cols] if over else qk_fit.scale.to(F64)
    end, end_div = w * gamma, qk_div.clone()
    const = torch.zeros(len(positions), d_k, dtype=F64)  # "bias": what no write carries
    if lay.input_fit is not None:  # the attention reads the stream through its input norm, frozen
        end_div = end_div * _sigma(lay.input_fit, _rows(rec.stream[layer], positions))
        if lay.input_fit.bias is not None:
            const = const + (lay.input_fit.bias.to(F64) @ w * gamma / qk_div[:, None])
        end = lay.input_fit.reading(end)
    if b is not None:
        const = const + b * gamma / qk_div[:, None]
    chain, writes = _chain(layouts, rec, layer, positions)
    reader = _Reader(end, end_div, chain)
    names, parts = [], []
    for name, k, value in writes:
        m, div = reader.at(k)
        if isinstance(value, tuple):  # a layer's heads: z (H, p, d_v) and W_O through its post-norm, σ
            z, w_o, post_sigma = value
            per_head = torch.einsum("hpv,hvk->hpk", z, w_o @ m) / (div * post_sigma)[None, :, None]
            names += [f"{name}H{h}" for h in range(z.shape[0])]
            parts += list(per_head)
        else:
            names.append(name)
            parts.append((value @ m) / div[:, None])
    names.append("bias")
    parts.append(const)
    stacked = torch.stack(parts)  # (P, p, d_k)
    rotary = _exact(slice_rotary(rec.inputs[layer].position_embeddings, positions))
    turned = rotate_qk(stacked[:, None], stacked[:0, None], rotary, mha.rope)[0][:, 0]  # (P, p, d_k): q only
    return Side(names, turned.to(F64))


def _exact(rotary):
    """RoPE's angles on the CPU in float64 (complex128 for Llama 4's complex ones), as the parts are."""
    if rotary is None or torch.is_tensor(rotary):
        return None if rotary is None else rotary.cpu().to(torch.complex128)
    return tuple(t.to(F64).cpu() for t in rotary)


def _chain(layouts, rec: StreamRecord, layer: int, positions: torch.Tensor):
    """The frozen norms between the first write and `layer` (a post-norm model's), and every write before
    `layer` as (name, index of the first norm it passes, (p, d) or a layer's heads' (z, W_O·, σ))."""
    chain: list[tuple[Norm, torch.Tensor]] = []
    writes: list = [("embed", 0, _rows(rec.stream[0], positions))]
    for lay in layouts[:layer]:
        at, w_o_layer = lay.layer, lay.w_o
        attn_out = _rows(rec.attn_out[at], positions)  # (p, d)
        z = _rows(rec.z[at].transpose(0, 1), positions).transpose(0, 1)  # (H, p, d_v)
        w_o = output_blocks(w_o_layer, z.shape[0]).to(F64).cpu()  # (H, d_v, d)
        bias = getattr(w_o_layer, "bias", None)
        if lay.post_norm is not None:
            post_sigma = _sigma(lay.post_norm, attn_out)
            w_o = lay.post_norm.frozen(w_o, ONE)
        else:
            post_sigma = torch.ones(len(positions), dtype=F64)
        writes.append((f"L{at}", len(chain), (z, w_o, post_sigma)))
        if bias is not None:
            b = bias.detach().to(F64).cpu()
            b = lay.post_norm.frozen(b, ONE) if lay.post_norm is not None else b
            writes.append((f"L{at} attn bias", len(chain), b[None, :] / post_sigma[:, None]))
        if lay.post_ln:
            a_in, a_out = _rows(rec.norm_io[(at, "attn_norm in")], positions), rec.norm_io[(at, "attn_norm out")]
            o_in = _rows(rec.norm_io[(at, "out_norm in")], positions)
            chain.append((lay.attn_norm, _sigma(lay.attn_norm, a_in)))
            _bias_part(writes, f"L{at} attn norm bias", lay.attn_norm, len(chain), len(positions))
            writes.append((f"L{at} MLP", len(chain), o_in - _rows(a_out, positions)))
            chain.append((lay.out_norm, _sigma(lay.out_norm, o_in)))
            _bias_part(writes, f"L{at} MLP norm bias", lay.out_norm, len(chain), len(positions))
        elif lay.mlp is not None:
            writes.append((f"L{at} MLP", len(chain), _rows(rec.mlp[at], positions)))
    return chain, writes


def _bias_part(writes: list, name: str, norm: Norm, k: int, p: int) -> None:
    if norm.bias is not None:
        writes.append((name, k, norm.bias.to(F64)[None, :].expand(p, -1)))
