"""RWKV's time mixing (RWKV-4, transformers' `rwkv`): a normalised weighted average per channel over the earlier
tokens and the token itself, exact.

Per channel c, with k_t and v_t the key and value (each projected from the token mixed with the one before it,
`time_mix_key`, `time_mix_value`), w = −exp(time_decay[c]) and the bonus u = time_first[c] of the token itself:

    wkv_t[c] = (Σ_{s<t} e^{(t−1−s) w + k_s[c]} v_s[c] + e^{u + k_t[c]} v_t[c])
             / (Σ_{s<t} e^{(t−1−s) w + k_s[c]} + e^{u + k_t[c]})

so A[c, t, s] is a softmax over s ≤ t of (t−1−s) w + k_s[c] (s < t) and u + k_t[c] (s = t): no weight negative,
every row summing to 1. Folded into A: the keys, the decay and the bonus. The value-like vector is v (the value
projection's output), one number per channel. Outside the mixing: the receptance gate σ(r_t) and the output
projection: output_t = W_out (σ(r_t) ⊙ wkv_t). The channels are thousands: the views read the mean over blocks of
them (`selective.block_mean`), as for Mamba-1."""

from __future__ import annotations

import torch

from mha_viz_models.effective.layer import EffectiveLayer, Taps, as_np, linear, weight_parts
from mha_viz_models.effective.selective import per_channel

KIND = "rwkv"
NAME = "RWKV (time mixing)"  # what tables and the grid call this kind
CHUNK = 64  # queries a chunk of `wkv_matrix`


def matches(module) -> bool:
    return all(hasattr(module, a) for a in ("time_decay", "time_first", "time_mix_key", "key", "value", "receptance",
                                            "output"))


def taps(module) -> dict:
    return {"key": (module.key, "out"), "value": (module.value, "out"), "receptance": (module.receptance, "out")}


def wkv_matrix(k: torch.Tensor, time_decay: torch.Tensor, time_first: torch.Tensor,
               chunk: int = CHUNK) -> torch.Tensor:
    """A[c, t, s] for keys k (n, channels): (channels, n, n) float32, each row a softmax over s ≤ t computed in
    float64, `chunk` queries at a time."""
    n, channels = k.shape
    k = k.double().t()  # (c, n)
    w = -torch.exp(time_decay.detach().double())[:, None, None]  # (c, 1, 1)
    u = time_first.detach().double()[:, None]  # (c, 1)
    out = torch.zeros(channels, n, n)
    s = torch.arange(n, dtype=torch.float64)
    for b in range(0, n, chunk):
        t = torch.arange(b, min(n, b + chunk), dtype=torch.float64)
        logits = (t[:, None] - 1 - s[None]) * w + k[:, None, :]  # (c, q, n): the earlier keys
        logits = logits.masked_fill(s[None] >= t[:, None], float("-inf"))  # the token itself below, the later out
        rows = torch.arange(len(t))
        logits[:, rows, t.long()] = u + k[:, t.long()]
        out[:, b:b + len(t)] = torch.softmax(logits, dim=-1).float()
    return out


CHANNEL_MEANS = True  # as Mamba-1's (`selective.per_channel`)


def compute(module, got: Taps, layer: int, name: str, *, channel_means: bool = False) -> EffectiveLayer:
    k, v, r = got["key"], got["value"], got["receptance"]
    parts = {"gate": as_np(torch.sigmoid(r)), **weight_parts("output", module.output)}
    bare = EffectiveLayer(
        layer=layer, module=name, kind=KIND, label=f"{NAME}: a softmax over the earlier tokens, one per channel",
        structure="decaying softmax", grouping="channel",
        folded="the keys k_s, the decay (t−1−s)·w and the bonus u of the token itself",
        value_name="v (the value projection's output)", matrix=None, values=as_np(v[:, :, None]), parts=parts)
    return per_channel(bare, lambda i, j: wkv_matrix(k[:, i:j], module.time_decay[i:j], module.time_first[i:j]), v,
                       channel_means)


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    y = torch.as_tensor(layer.mixed())[..., 0]
    return linear(y * torch.as_tensor(layer.parts["gate"]), layer.parts, "output")
