"""Drop-in replacements that make a loaded Hugging Face model compute attention with our MHA.

Each adapter takes the place of one self-attention module, keeps the trained weights (the same
parameters where the layout allows, a copy where the original fuses them: GPT-2's Conv1D,
GPT-NeoX's and Phi-3's fused q, k, v), accepts the arguments the surrounding Hugging Face layer
passes, and returns `(output, probabilities)` as the original did. What the relatives add to q,
k or the scores (per-head q/k norms, logit soft-capping, sliding windows, partial rotary) is our
MHA's too. Which module is which family, and which adapter it gets: `mha_viz_models.families.builtin`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mha_viz_models.attention.config import Visibility
from mha_viz_models.attention.layer_features import layer_window, llama_features, per_head_norm
from mha_viz_models.attention.mha import MultiHeadAttention

__all__ = [
    "Adapter", "BertFamilyAttention", "FusedQKVAttention", "GPT2FamilyAttention", "LlamaFamilyAttention",
    "GPTJFamilyAttention", "RotaryAttention", "Seq2SeqAttention", "T5FamilyAttention", "blocked_rows", "call_rotary",
    "every_two_rows", "grouped_rows", "interleaved_rows", "layer_window", "per_head_norm", "rows_linear",
]


def _update_cache(cache: Any, k: torch.Tensor, v: torch.Tensor, layer_idx: int | None):
    """Append k, v (B, G, n, d) to a Hugging Face cache; returns the keys and values to attend to."""
    if cache is None:
        return k, v
    cache = getattr(cache, "self_attention_cache", cache)  # EncoderDecoderCache holds two
    return cache.update(k, v, layer_idx)


def dropout_p(original: nn.Module) -> float:
    """The attention dropout of a Hugging Face module: a probability, or an nn.Dropout (Falcon)."""
    p = getattr(original, "attention_dropout", 0.0)
    return float(p.p if isinstance(p, nn.Dropout) else p or 0.0)


def _is_causal_fallback(attention_mask: torch.Tensor | None, causal: bool) -> bool:
    # Hugging Face passes a materialised causal mask to eager attention; if it ever passes
    # none, a decoder must still not look ahead.
    return causal and attention_mask is None


class Adapter(nn.Module):
    """A self-attention layer computed by our MHA (`self.mha`), returning (output, probabilities).
    `need_weights = False` makes the layer run PyTorch's fused attention and return no
    probabilities (lean capture recomputes the ones it needs)."""

    need_weights = True
    mha: MultiHeadAttention

    def rotary(self, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
        """RoPE's (cos, sin) for the call whose keyword arguments are `kwargs` (what lean capture
        records with each layer's input): the `position_embeddings` the model passed, if any."""
        return kwargs.get("position_embeddings")


class BertFamilyAttention(Adapter):
    """Replaces a BERT-style `XAttention` (`.self` with query/key/value, `.output` with
    dense/dropout/LayerNorm; `flat`: ALBERT's, all on the module): MHA, then
    LayerNorm(dropout(W_O·) + residual)."""

    def __init__(self, original: nn.Module, num_heads: int, causal: bool, *, flat: bool = False) -> None:
        super().__init__()
        # flat (ALBERT): query, key, value, dense, output_dropout and LayerNorm on the module itself
        sa, out = (original, original) if flat else (original.self, original.output)
        self.mha = MultiHeadAttention.from_linears(
            sa.query, sa.key, sa.value, out.dense, num_heads=num_heads, scale=sa.scaling,
            dropout=(sa.attention_dropout if flat else sa.dropout).p,
        )
        self.output_dropout = out.output_dropout if flat else out.dropout
        self.layer_norm = out.LayerNorm
        self.layer_idx = getattr(sa, "layer_idx", None)
        self.causal = causal

    def forward(self, hidden_states, attention_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None, past_key_values=None, **kwargs):
        q, k, v = self.mha.project_self(hidden_states)  # (B, h, n, d_k), (B, h, n, d_k), (B, h, n, d_v)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, self.causal))
        out = self.mha.merge(z)  # (B, n, d_model)
        return self.layer_norm(self.output_dropout(out) + hidden_states), probs


class GPT2FamilyAttention(Adapter):
    """Replaces GPT-2's attention: fused Conv1D c_attn (x @ W + b, W of shape (d, 3d)) split
    into W_Q, W_K, W_V as nn.Linear (weight = Wᵀ); c_proj becomes W_O."""

    def __init__(self, original: nn.Module, num_heads: int) -> None:
        super().__init__()
        d = original.embed_dim
        w, b = original.c_attn.weight.detach(), original.c_attn.bias.detach()  # (d, 3d), (3d,)
        linears = []
        for i in range(3):
            lin = nn.Linear(d, d, device=w.device, dtype=w.dtype)
            with torch.no_grad():
                lin.weight.copy_(w[:, i * d:(i + 1) * d].T)  # (d_out, d_in)
                lin.bias.copy_(b[i * d:(i + 1) * d])
            linears.append(lin)
        w_o = nn.Linear(d, d, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            w_o.weight.copy_(original.c_proj.weight.T)
            w_o.bias.copy_(original.c_proj.bias)
        self.mha = MultiHeadAttention.from_linears(
            *linears, w_o, num_heads=num_heads, scale=original.scaling, dropout=original.attn_dropout.p,
        )
        self.resid_dropout = original.resid_dropout
        self.layer_idx = original.layer_idx

    def forward(self, hidden_states, past_key_values=None, attention_mask=None, **kwargs):
        q, k, v = self.mha.project_self(hidden_states)  # (B, h, n, d_k), (B, h, n, d_k), (B, h, n, d_v)
        k, v = _update_cache(past_key_values, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, True))
        return self.resid_dropout(self.mha.merge(z)), probs


class RotaryAttention(Adapter):
    """A decoder self-attention computed by our MHA in the modern Hugging Face calling style:
    RoPE's (cos, sin) in `position_embeddings` (partial rotary when they are narrower than
    d_k), the mask in `attention_mask`, the KV cache in `past_key_values` (`layer_past` for
    GPT-NeoX). Subclasses set `self.mha` and `self.layer_idx`."""

    layer_idx: int | None = None
    causal = True  # an encoder's adapter (DistilBERT) sets False: no mask given means no mask

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None,
                past_key_values=None, layer_past=None, **kwargs):
        # position_embeddings: RoPE's (cos, sin), (B, n, r) each (Llama 4: complex angles), turned
        # into q and k unless the layer has no RoPE
        cache = past_key_values if past_key_values is not None else layer_past
        past = cache.get_seq_length(self.layer_idx) if cache is not None and self.mha.temperature else 0
        q, k, v = self.mha.project_self(hidden_states, position_embeddings, past=past)  # (B, h|G|G, n, d_k)
        k, v = _update_cache(cache, k, v, self.layer_idx)
        z, probs = self.mha.attend(q, k, v, attn_mask=attention_mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(attention_mask, self.causal))
        return self.mha.merge(z), probs


LLAMA_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj")


class LlamaFamilyAttention(RotaryAttention):
    """Replaces an attention with four separate projections, named by `names` (Llama's q/k/v/o_proj
    by default; OPT's out_proj, DistilBERT's q_lin…out_lin), RoPE from `position_embeddings`
    when the model passes it, grouped-query attention, and what Llama's relatives add: per-head
    q/k norms (Qwen3), logit soft-capping and a query pre-attention scalar (Gemma 2), sliding
    windows (Mistral, Gemma 2, Qwen2/3), and what `mha_viz_models.attention.layer_features` reads: layers without
    RoPE, other RoPE layouts, q/k norms over every head at once, sink logits, chunks. `scaling`
    is the module's own (OPT scales q by it), times its `key_multiplier` where it has one (Falcon-H1's keys)."""

    def __init__(self, original: nn.Module, num_heads: int, num_kv_heads: int, config=None, *,
                 names: tuple[str, str, str, str] = LLAMA_NAMES, causal: bool = True) -> None:
        super().__init__()
        w_q, w_k, w_v, w_o = (getattr(original, name) for name in names)
        d_k = w_q.out_features // num_heads
        scale = getattr(original, "scaling", None)
        if scale is not None and getattr(original, "key_multiplier", None) is not None:
            scale = float(scale) * float(original.key_multiplier)  # Falcon-H1 multiplies its keys (μP): the scores
        self.mha = MultiHeadAttention.from_linears(
            w_q, w_k, w_v, w_o, num_heads=num_heads, num_kv_heads=num_kv_heads,
            scale=float(scale) if scale is not None else None, dropout=dropout_p(original),
            **llama_features(original, config, d_k),  # positions, visibility, extras
        )
        self.layer_idx = getattr(original, "layer_idx", None)
        self.causal = causal


# --- fused q, k, v projections: where each head's rows lie in the one weight -------------------
def interleaved_rows(h: int, g: int, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GPT-NeoX (Pythia): the fused output is [q_0, k_0, v_0, q_1, k_1, v_1, …], d rows each
    (h = g). Returns the rows of W_Q, W_K, W_V in head order."""
    start, r = torch.arange(h)[:, None] * 3 * d, torch.arange(d)
    return (start + r).flatten(), (start + d + r).flatten(), (start + 2 * d + r).flatten()


def blocked_rows(h: int, g: int, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Phi-3: the fused output is [Q (h·d) | K (g·d) | V (g·d)]."""
    return torch.arange(h * d), h * d + torch.arange(g * d), (h + g) * d + torch.arange(g * d)


def grouped_rows(h: int, g: int, d: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Falcon's new decoder architecture: for each KV head, its h/g query heads, then its key
    and its value, d rows each: [q_{0,0} … q_{0,r−1}, k_0, v_0, q_{1,0} …]."""
    r, r_ = h // g, torch.arange(d)
    start = torch.arange(g)[:, None] * (r + 2) * d
    q = (start[:, :, None] + torch.arange(r)[None, :, None] * d + r_).flatten()
    return q, (start + r * d + r_).flatten(), (start + (r + 1) * d + r_).flatten()


def rows_linear(fused: nn.Linear, rows: torch.Tensor) -> nn.Linear:
    """A new nn.Linear computing the given output rows of `fused` (a copy of those weights)."""
    w = fused.weight.detach()
    lin = nn.Linear(w.shape[1], len(rows), bias=fused.bias is not None, device=w.device, dtype=w.dtype)
    with torch.no_grad():
        lin.weight.copy_(w[rows.to(w.device)])
        if fused.bias is not None:
            lin.bias.copy_(fused.bias.detach()[rows.to(w.device)])
    return lin


def every_two_rows(d: int, r: int) -> torch.Tensor:
    """Within one head: the order that lays GPT-J's rotary pairs (0, 1), (2, 3)… of its first r
    dimensions out as halves [0, 2, 4…, 1, 3, 5…] (then the other d − r as they are), so that
    rotate-every-two becomes rotate-half. q·k is unchanged: both are reordered alike."""
    return torch.cat([torch.arange(0, r, 2), torch.arange(1, r, 2), torch.arange(r, d)])


def table_rotary(embed_positions: torch.Tensor, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-J's rotary angles for a call (its `position_ids`, else 0, 1, …), from its [sin | cos]
    table, laid out for rotate-half on the reordered rows (`every_two_rows`): (cos, sin), (B, n, r)."""
    positions = kwargs.get("position_ids")
    if positions is None:
        positions = torch.arange(kwargs["_hidden"].shape[1], device=embed_positions.device)[None]
    sin, cos = embed_positions[positions].chunk(2, dim=-1)  # (B, n, r / 2) each
    return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)


def call_rotary(module: nn.Module, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
    """RoPE's (cos, sin) of a call of an attention module (ours or the original, whose keyword
    arguments are `kwargs`, its hidden states under "_hidden"), as our MHA applies them: what
    lean capture records with each layer's input, without building any adapter."""
    if isinstance(module, Adapter):
        return module.rotary(kwargs)
    if all(hasattr(module, a) for a in ("embed_positions", "rotary_dim", "scale_attn")):  # GPT-J's own table
        return table_rotary(module.embed_positions, kwargs)
    return kwargs.get("position_embeddings")


class GPTJFamilyAttention(RotaryAttention):
    """Replaces GPT-J's attention (q/k/v_proj, out_proj, no biases): rotary on the first
    `rotary_dim` dimensions of each head in adjacent pairs, its angles from the module's own
    sinusoid table and `position_ids`. W_Q and W_K are copies with each head's rows reordered
    (`every_two_rows`), so our rotate-half RoPE computes the same scores; W_V and W_O are the
    original layers."""

    def __init__(self, original: nn.Module, num_heads: int) -> None:
        super().__init__()
        d = original.head_dim
        r = original.rotary_dim or d
        rows = (torch.arange(num_heads)[:, None] * d + every_two_rows(d, r)).flatten()
        self.mha = MultiHeadAttention.from_linears(
            rows_linear(original.q_proj, rows), rows_linear(original.k_proj, rows), original.v_proj, original.out_proj,
            num_heads=num_heads, scale=1.0 / float(original.scale_attn), dropout=float(original.attn_dropout.p))
        self.register_buffer("embed_positions", original.embed_positions, persistent=False)  # [sin | cos], (P, r)
        self.resid_dropout = original.resid_dropout
        self.layer_idx = original.layer_idx

    def rotary(self, kwargs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        return table_rotary(self.embed_positions, kwargs)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, position_ids=None, **kwargs):
        rope = self.rotary({"position_ids": position_ids, "_hidden": hidden_states})
        out, probs = super().forward(hidden_states, position_embeddings=rope, attention_mask=attention_mask,
                                     layer_past=layer_past)
        return self.resid_dropout(out), probs


class FusedQKVAttention(RotaryAttention):
    """Replaces an attention whose q, k, v come from one fused linear layer (GPT-NeoX's
    `query_key_value`, Phi-3's `qkv_proj`, Falcon's, ModernBERT's `Wqkv`): W_Q, W_K, W_V are
    copies of their rows (`rows` says where they lie), W_O is the original output layer. An
    encoder's (`causal` False) sliding window is `window` tokens either side."""

    def __init__(self, original: nn.Module, fused: nn.Linear, out: nn.Linear, rows, num_heads: int,
                 num_kv_heads: int, config=None, *, scale: float | None = None, causal: bool = True,
                 window: int | None = None) -> None:
        super().__init__()
        d = out.in_features // num_heads
        q_rows, k_rows, v_rows = rows(num_heads, num_kv_heads, d)
        self.mha = MultiHeadAttention.from_linears(
            rows_linear(fused, q_rows), rows_linear(fused, k_rows), rows_linear(fused, v_rows), out,
            num_heads=num_heads, num_kv_heads=num_kv_heads, scale=original.scaling if scale is None else scale,
            dropout=dropout_p(original),
            visibility=Visibility(window=layer_window(original, config) if causal else window),
        )
        self.causal = causal
        self.layer_idx = original.layer_idx


class Seq2SeqAttention(Adapter):
    """Replaces one attention of a BART-family encoder–decoder (BART, Marian, mBART, Pegasus:
    q/k/v_proj, out_proj, `scaling`), in any of its three roles, read from the original's flags:
    `role` is "encoder" (self-attention over the source), "decoder" (causal self-attention over
    the target) or "cross" (target queries over the encoder's output, `key_value_states`). The
    KV cache follows Hugging Face's: the cross keys and values are computed once per source."""

    def __init__(self, original: nn.Module, *,
                 names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "out_proj"),
                 num_heads: int | None = None, scale: float | None = None) -> None:
        super().__init__()
        w_q, w_k, w_v, w_o = (getattr(original, name) for name in names)
        self.mha = MultiHeadAttention.from_linears(
            w_q, w_k, w_v, w_o, num_heads=num_heads or original.num_heads,
            scale=float(original.scaling if scale is None else scale))
        self.layer_idx = getattr(original, "layer_idx", None)
        self.role = ("encoder" if not original.is_decoder else "decoder" if original.is_causal else "cross")

    def project(self, hidden_states, key_value_states, past_key_values):
        """q (B, h, n_q, d_k) and, through the cache, k and v (B, h, n_k, d) of this role."""
        q = self.mha.project_q(hidden_states)  # (B, h, n_q, d_k)
        cross = key_value_states is not None
        cache = past_key_values
        if cache is not None and hasattr(cache, "self_attention_cache"):  # EncoderDecoderCache
            updated = cache.is_updated.get(self.layer_idx)
            layers = cache.cross_attention_cache if cross else cache.self_attention_cache
        else:
            updated, layers = False, cache
        if cross and updated:  # the source's keys and values, computed at the first step
            return q, layers.layers[self.layer_idx].keys, layers.layers[self.layer_idx].values
        source = key_value_states if cross else hidden_states
        k, v = self.mha.project_kv(source, source)  # (B, h, n_k, d_k), (B, h, n_k, d_v)
        if layers is not None:
            k, v = layers.update(k, v, self.layer_idx)
            if cross and hasattr(cache, "is_updated"):
                cache.is_updated[self.layer_idx] = True
        return q, k, v

    def attend_merge(self, q, k, v, mask):
        z, probs = self.mha.attend(q, k, v, attn_mask=mask, need_weights=self.need_weights,
                                   is_causal=_is_causal_fallback(mask, self.role == "decoder"))
        return self.mha.merge(z), probs

    def forward(self, hidden_states, key_value_states=None, past_key_values=None, attention_mask=None, **kwargs):
        return self.attend_merge(*self.project(hidden_states, key_value_states, past_key_values), attention_mask)


class T5FamilyAttention(Seq2SeqAttention):
    """Replaces a T5 attention (q, k, v, o; no scaling) in any role: the relative position bias
    (computed by the stack's first layer, handed to the others as `position_bias`) is added to the
    scores with the mask, and the module returns (output, position_bias, probabilities) as T5's."""

    def __init__(self, original: nn.Module) -> None:
        super().__init__(original, names=("q", "k", "v", "o"), num_heads=original.n_heads, scale=1.0)
        self.has_relative_attention_bias = bool(original.has_relative_attention_bias)
        if self.has_relative_attention_bias:
            self.relative_attention_bias = original.relative_attention_bias  # the same embedding
        object.__setattr__(self, "_buckets", original)  # its compute_bias, outside the module tree

    def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None, past_key_values=None,
                **kwargs):
        past = past_key_values.get_seq_length(self.layer_idx) if past_key_values is not None else 0
        q, k, v = self.project(hidden_states, key_value_states, past_key_values)
        if position_bias is None:
            n_q, n_k = q.shape[-2], k.shape[-2]
            position_bias = (self._buckets.compute_bias(n_q, n_k, device=q.device, past_seen_tokens=past)
                             if self.has_relative_attention_bias else
                             torch.zeros((1, self.mha.num_heads, n_q, n_k), device=q.device, dtype=q.dtype))
        out, probs = self.attend_merge(q, k, v, position_bias if mask is None else position_bias + mask)
        return out, position_bias, probs
