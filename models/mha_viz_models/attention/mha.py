"""Multi-head attention written out step by step, returning every head's probabilities.

The module of Vaswani et al. (2017), done properly: separate W_Q, W_K, W_V, W_O; heads as a
tensor axis; padding and causal masks; cross-attention (n_q != n_k); d_k independent of
d_model / h; grouped-query attention (num_kv_heads dividing num_heads); optional rotary
position embeddings (RoPE) applied to q and k before the scores, and what recent models add to
q, k, the mask or the softmax (see the class's arguments). The steps are public methods
(`project_self` for q, k, v with RoPE, or `project_q`, `project_kv` and `project_v`; `attend`;
`merge`) so that adapters for pretrained models can put a KV cache between them and the teaching
view can show each intermediate tensor.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mha_viz_models.attention.rotary import LAYOUTS, apply_rotary, query_temperature, rotate_half, rotate_qk
from mha_viz_models.attention.visibility import hidden_keys, sink_column

__all__ = ["MultiHeadAttention", "apply_rotary", "rotate_half"]


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over `num_heads` heads.

    Args:
        d_model: width of the query input (and of the output).
        num_heads: number of query heads h.
        d_k: width of each head's queries and keys (default d_model // h).
        d_v: width of each head's values (default d_k).
        num_kv_heads: G key/value heads shared by groups of h / G query heads (default h: plain
            MHA; 1: multi-query attention). Query head i reads KV head i // (h / G).
        d_kv_in: width of the key/value input, for cross-attention (default d_model).
        bias: whether the four projections have a bias.
        dropout: dropout on the probabilities, in training only.
        scale: multiplier of the scores (default 1 / sqrt(d_k)).
        q_norm, k_norm: a norm applied to each head's q and k before RoPE (Qwen3, OLMo-style
            per-head RMSNorm over d_k); None: none.
        softcap: logit soft-capping (Gemma 2): scaled scores become softcap · tanh(s / softcap)
            before the mask; None: none.
        window: a sliding window (Mistral, Gemma 2's and Qwen's sliding layers): under the causal
            mask, query i also stops seeing keys j <= i - window; without it (an encoder's local
            layers, ModernBERT), query i sees keys |i - j| <= window only; None: none.
        rope: the layout of the RoPE angles handed to the layer (`mha_viz_models.attention.rotary.LAYOUTS`; complex
            angles are told by their type), or None: a layer without RoPE (NoPE) that is handed
            them all the same (SmolLM3's, Llama 4's, Cohere 2's global layers).
        norm_over_heads: q_norm and k_norm normalise the whole projection, every head at once,
            before it is split into heads (OLMo 2: RMSNorm over h·d_k).
        rotated_norm: a norm of each head's q and k after RoPE (Llama 4's L2 norm); None: none.
        temperature: (floor_scale, attn_scale) of Llama 4's query temperature on its NoPE layers
            (`mha_viz_models.attention.rotary.query_temperature`); None: none.
        sinks: (h,) learned sink logits (GPT-OSS): one more key column per head in the softmax,
            then dropped (rows sum to less than 1); None: none.
        chunk: chunked attention (Llama 4): query i sees keys j of its own chunk only,
            j // chunk == i // chunk; None: none.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        d_k: int | None = None,
        d_v: int | None = None,
        num_kv_heads: int | None = None,
        d_kv_in: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        scale: float | None = None,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
        softcap: float | None = None,
        window: int | None = None,
        rope: str | None = "halves",
        norm_over_heads: bool = False,
        rotated_norm: nn.Module | None = None,
        temperature: tuple[float, float] | None = None,
        sinks: torch.Tensor | None = None,
        chunk: int | None = None,
    ) -> None:
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_heads < 1 or num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads ({num_kv_heads}) must divide num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.d_k = d_model // num_heads if d_k is None else d_k
        self.d_v = self.d_k if d_v is None else d_v
        d_kv_in = d_model if d_kv_in is None else d_kv_in
        self.scale = 1.0 / math.sqrt(self.d_k) if scale is None else scale
        self.w_q = nn.Linear(d_model, num_heads * self.d_k, bias=bias)
        self.w_k = nn.Linear(d_kv_in, num_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_kv_in, num_kv_heads * self.d_v, bias=bias)
        self.w_o = nn.Linear(num_heads * self.d_v, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.q_norm, self.k_norm = q_norm, k_norm
        self.softcap = None if not softcap else float(softcap)
        self.window = None if not window else int(window)
        if rope not in (*LAYOUTS, None):
            raise ValueError(f"rope must be one of {LAYOUTS} or None; got {rope!r}")
        self.rope, self.norm_over_heads, self.rotated_norm = rope, bool(norm_over_heads), rotated_norm
        self.temperature = None if temperature is None else tuple(map(float, temperature))
        self.sinks, self.chunk = sinks, None if not chunk else int(chunk)
        self._packed: tuple | None = None  # (parameter versions, W_QKV, b_QKV), see project_qkv

    @classmethod
    def from_linears(
        cls,
        w_q: nn.Linear,
        w_k: nn.Linear,
        w_v: nn.Linear,
        w_o: nn.Linear,
        *,
        num_heads: int,
        num_kv_heads: int | None = None,
        scale: float | None = None,
        dropout: float = 0.0,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
        **features,
    ) -> "MultiHeadAttention":
        """Wrap existing projection layers (the same parameters, not copies) of a trained model;
        q_norm and k_norm too, when given. `features`: the constructor's softcap, window, rope,
        norm_over_heads, rotated_norm, temperature, sinks (the model's own parameter) and chunk."""
        d_k = w_q.out_features // num_heads
        kv = num_heads if num_kv_heads is None else num_kv_heads
        with torch.device("meta"):  # placeholders only: the real layers are put in below
            mha = cls(
                w_q.in_features, num_heads, d_k=d_k, d_v=w_v.out_features // kv, num_kv_heads=kv,
                d_kv_in=w_k.in_features, bias=False, dropout=dropout, scale=scale, **features,
            )
        mha.q_norm, mha.k_norm = q_norm, k_norm
        mha.d_model = w_o.out_features
        mha.w_q, mha.w_k, mha.w_v, mha.w_o = w_q, w_k, w_v, w_o
        return mha

    # --- the steps ---------------------------------------------------------------------------
    def project_q(self, query: torch.Tensor) -> torch.Tensor:
        """(B, n_q, d_model) -> (B, h, n_q, d_k)."""
        return self._heads(self.w_q(query), self.num_heads, self.q_norm)  # (B, h, n_q, d_k)

    def _heads(self, x: torch.Tensor, heads: int, norm: nn.Module | None) -> torch.Tensor:
        """A q or k projection (B, n, heads·d_k) split into heads, (B, heads, n, d_k), through its
        norm (if any): over the whole projection before the split (`norm_over_heads`), else over
        each head's d_k values."""
        B, n, _ = x.shape
        flat = norm is not None and self.norm_over_heads
        x = (norm(x) if flat else x).view(B, n, heads, self.d_k)  # (B, n, heads, d_k)
        return (x if norm is None or flat else norm(x)).transpose(1, 2)  # (B, heads, n, d_k)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's q, k, v from one matrix product with W_Q, W_K, W_V stacked, as
        PyTorch's own MHA does (one large product is faster than three): (B, n, d_model) ->
        (B, h, n, d_k), (B, G, n, d_k), (B, G, n, d_v). Without autograd the stacked weights
        are kept until a parameter changes."""
        B, n, _ = x.shape
        weight, bias = self._stacked()
        qkv = F.linear(x, weight, bias)  # (B, n, h·d_k + G·d_k + G·d_v)
        h, g = self.num_heads, self.num_kv_heads
        q, k, v = qkv.split([h * self.d_k, g * self.d_k, g * self.d_v], dim=-1)
        return (self._heads(q, h, self.q_norm),  # (B, h, n, d_k)
                self._heads(k, g, self.k_norm),  # (B, G, n, d_k)
                v.view(B, n, g, self.d_v).transpose(1, 2))  # (B, G, n, d_v)

    def project_self(self, x: torch.Tensor, rotary=None, *, stacked: bool = False,
                     past: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's q, k, v from one input, RoPE applied when `rotary` = (cos, sin) (or
        complex angles) is given and the layer has RoPE, then the norm after RoPE and the query
        temperature, if any: (B, n, d_model) -> q (B, h, n, d_k), k (B, G, n, d_k), v (B, G, n, d_v).
        past: tokens already in the KV cache (the temperature depends on position).

        stacked: one product with W_Q, W_K, W_V stacked (`project_qkv`, faster; what `forward`
        uses) where the three projections allow it; otherwise three products (`project_q`,
        `project_kv`), which round exactly as Hugging Face's attention does (what the adapters
        use, so that their probabilities are bit-identical to eager attention's).
        """
        if stacked and self.w_k.in_features == self.w_q.in_features and \
                len({lin.bias is None for lin in (self.w_q, self.w_k, self.w_v)}) == 1:
            q, k, v = self.project_qkv(x)  # (B, h, n, d_k), (B, G, n, d_k), (B, G, n, d_v)
        else:
            q = self.project_q(x)  # (B, h, n, d_k)
            k, v = self.project_kv(x, x)  # (B, G, n, d_k), (B, G, n, d_v)
        q, k = rotate_qk(q, k, rotary, self.rope)
        if self.rotated_norm is not None:
            q, k = self.rotated_norm(q), self.rotated_norm(k)
        if self.temperature is not None:
            scale = query_temperature(q.shape[-2], past, *self.temperature, device=q.device)  # (n, 1)
            q = (q * scale).to(q.dtype)
        return q, k, v

    def _stacked(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        layers = (self.w_q, self.w_k, self.w_v)
        params = [t for lin in layers for t in (lin.weight, lin.bias) if t is not None]
        if torch.is_grad_enabled() and any(t.requires_grad for t in params):
            return self._stack(layers)  # part of the graph: stacked afresh each call
        key = tuple((t.data_ptr(), t._version) for t in params)
        if self._packed is None or self._packed[0] != key:  # ordinary tensors even when made in inference
            with torch.inference_mode(False), torch.no_grad():  # mode: a gradient pass saves them for backward
                self._packed = (key, *self._stack(layers))
        return self._packed[1], self._packed[2]

    @staticmethod
    def _stack(layers) -> tuple[torch.Tensor, torch.Tensor | None]:
        weight = torch.cat([lin.weight for lin in layers])  # (h·d_k + G·d_k + G·d_v, d_model)
        bias = None if layers[0].bias is None else torch.cat([lin.bias for lin in layers])
        return weight, bias

    def project_kv(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, n_k, d_kv_in) twice -> k (B, G, n_k, d_k), v (B, G, n_k, d_v)."""
        # (B, G, n_k, d_k), (B, G, n_k, d_v)
        return self._heads(self.w_k(key), self.num_kv_heads, self.k_norm), self.project_v(value)

    def project_v(self, value: torch.Tensor) -> torch.Tensor:
        """(B, n_k, d_kv_in) -> v (B, G, n_k, d_v), the values alone (what the heads write:
        `mha_viz_models.reading.values`)."""
        B, n_k, _ = value.shape
        return self.w_v(value).view(B, n_k, self.num_kv_heads, self.d_v).transpose(1, 2)  # (B, G, n_k, d_v)

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        attn_mask: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = True,
        heads: list[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Scores, masks, softmax and weighted sum for all heads at once.

        q: (B, h, n_q, d_k); k: (B, G, n_k, d_k); v: (B, G, n_k, d_v).
        attn_mask: broadcastable to (B, h, n_q, n_k); bool (True = may attend) or float (added
            to the scores, -inf or a large negative number to block).
        key_padding_mask: (B, n_k) bool, True where the key is padding (PyTorch's convention).
        is_causal: query i sees keys j <= i + (n_k - n_q) (the last n_q positions of the keys).
        need_weights: False hands the same computation to PyTorch's fused
            `scaled_dot_product_attention` (no (n_q, n_k) matrix is kept) and returns None for
            the probabilities.
        heads: which heads q holds, when only some (their sink logits are read); None: all.
        Returns z (B, h, n_q, d_v), the heads' outputs before concatenation, and the
        probabilities (B, h, n_q, n_k). A query row with no visible key gets zeros in both.
        With sinks, rows sum to less than 1: the rest is the sink's.
        """
        if not need_weights:
            return self._attend_fused(q, k, v, attn_mask, key_padding_mask, is_causal), None
        group = q.shape[1] // k.shape[1]  # 1 when the caller already matched heads (a subset)
        if group > 1:  # query head i reads KV head i // group
            k = k.repeat_interleave(group, dim=1)  # (B, h, n_k, d_k)
            v = v.repeat_interleave(group, dim=1)  # (B, h, n_k, d_v)
        scores = self.scores(q, k)  # (B, h, n_q, n_k), scaled (and soft-capped)
        n_q, n_k = scores.shape[-2:]

        def fits(mask: torch.Tensor) -> bool:
            return torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
        blocked = self.hidden_keys(n_q, n_k, q.device, causal=is_causal)  # (n_q, n_k) bool, or None
        if key_padding_mask is not None:
            pad = key_padding_mask.to(torch.bool)[:, None, None, :]  # (B, 1, 1, n_k)
            blocked = pad if blocked is None else blocked | pad
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                blocked = ~attn_mask if blocked is None else blocked | ~attn_mask
            else:
                scores = scores.add_(attn_mask) if fits(attn_mask) else scores + attn_mask
        if blocked is not None:
            scores = scores.masked_fill_(blocked, float("-inf")) if fits(blocked) else \
                scores.masked_fill(blocked, float("-inf"))
        if self.sinks is not None:  # their column joins the softmax, then is dropped
            scores = torch.cat((scores, sink_column(self.sinks, scores, heads)), dim=-1)  # (B, h, n_q, n_k + 1)
        if scores.dtype == torch.float32 and not scores.requires_grad and scores.is_contiguous():
            # in place, as PyTorch's own MHA does: a fresh (n_q, n_k) buffer per call costs more
            # than the softmax itself at long n (page faults); autograd needs the copy
            probs = torch.ops.aten._softmax.out(scores, -1, False, out=scores)  # (B, h, n_q, n_k)
        else:  # half precision (or autograd): the softmax in float32, and kept so, rows summing to 1
            probs = torch.softmax(scores, dim=-1, dtype=torch.float32)  # (B, h, n_q, n_k)
        if blocked is not None or attn_mask is not None:  # a row with every key blocked is 0/0:
            # define it as no attention (a no-op on finite rows); in place unless autograd
            # needs softmax's output
            probs = probs.nan_to_num(0.0) if probs.requires_grad else probs.nan_to_num_(0.0)
        if self.sinks is not None:
            probs = probs[..., :-1]  # (B, h, n_q, n_k): the sinks' share is what the rows lack
        z = torch.matmul(self.dropout(probs).to(v.dtype), v)  # (B, h, n_q, d_v), in the model's dtype
        return z, probs

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Scaled scores (B, h, n_q, n_k) of q (B, h, n_q, d_k) against k (B, h, n_k, d_k), soft-
        capped when the head is (before any mask), as `attend` computes them.

        Scaled after the product, as Hugging Face's eager attention does, so that both give
        bit-identical probabilities (scaling q first rounds differently), unless the scale is a
        power of two (d_k = 64: 1/8), where scaling q first is exact and n_q / n_k times cheaper;
        in place where shapes allow, since the (n_q, n_k) passes are what costs."""
        if math.frexp(self.scale)[0] == 0.5:
            scores = torch.matmul(q * self.scale, k.transpose(-2, -1))  # (B, h, n_q, n_k)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)).mul_(self.scale)  # (B, h, n_q, n_k)
        if self.softcap is not None:  # Gemma 2: s / c, tanh, × c, in that order (as its eager code)
            scores = torch.tanh(scores / self.softcap) * self.softcap
        return scores

    def hidden_keys(self, n_q: int, n_k: int, device=None, *, causal: bool = True) -> torch.Tensor | None:
        """(n_q, n_k) bool, True where the causal mask, this layer's sliding window or its chunk
        hides key j from query i (`mha_viz_models.attention.visibility.hidden_keys`); None when nothing is hidden."""
        return hidden_keys(n_q, n_k, device, causal=causal, window=self.window, chunk=self.chunk)

    def _attend_fused(self, q, k, v, attn_mask, key_padding_mask, is_causal) -> torch.Tensor:
        """`attend` without probabilities, through F.scaled_dot_product_attention (which cannot
        soft-cap nor add sink logits: such heads are computed by `attend`)."""
        if self.softcap is not None or self.sinks is not None:
            return self.attend(q, k, v, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                               is_causal=is_causal)[0]
        n_q, n_k = q.shape[-2], k.shape[-2]
        allowed = None  # bool, True where a query may see a key; float masks are added instead
        # SDPA's is_causal aligns top-left; ours the ends
        if (is_causal and n_q != n_k) or self.window is not None or self.chunk is not None:
            allowed = ~self.hidden_keys(n_q, n_k, q.device, causal=is_causal)
            is_causal = False
        if key_padding_mask is not None:
            keep = ~key_padding_mask.to(torch.bool)[:, None, None, :]  # (B, 1, 1, n_k)
            allowed = keep if allowed is None else allowed & keep
        mask = attn_mask
        if allowed is not None:
            if mask is None or mask.dtype == torch.bool:
                mask = allowed if mask is None else allowed & mask
            else:
                mask = mask.masked_fill(~allowed, float("-inf"))
        if mask is not None and is_causal:  # SDPA takes one or the other
            causal = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril()
            mask = causal & mask if mask.dtype == torch.bool else mask.masked_fill(~causal, float("-inf"))
            is_causal = False
        z = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, scale=self.scale,
            dropout_p=self.dropout.p if self.training else 0.0,
            enable_gqa=q.shape[1] != k.shape[1],
        )  # (B, h, n_q, d_v)
        return z.nan_to_num(0.0) if mask is not None else z  # rows with no visible key: zeros

    def merge(self, z: torch.Tensor) -> torch.Tensor:
        """Concatenate the heads and apply W_O: (B, h, n_q, d_v) -> (B, n_q, d_model)."""
        B, _, n_q, _ = z.shape
        concat = z.transpose(1, 2).reshape(B, n_q, self.num_heads * self.d_v)  # (B, n_q, h*d_v)
        return self.w_o(concat)  # (B, n_q, d_model)

    def head_weights(self) -> dict[str, torch.Tensor]:
        """Per-head weight matrices, read from the projections (x @ W convention, no biases).

        W_Q (h, d_model, d_k), W_K (G, d_kv_in, d_k), W_V (G, d_kv_in, d_v), W_O (h, d_v, d_model):
        head i's output is z_i @ W_O[i]; under GQA query head i reads W_K, W_V [i // (h / G)].
        """
        h, g = self.num_heads, self.num_kv_heads
        def per_head(weight: torch.Tensor, heads: int) -> torch.Tensor:
            d_in = weight.shape[1]
            return weight.detach().T.reshape(d_in, heads, -1).permute(1, 0, 2)  # (heads, d_in, d_head)
        return {
            "W_Q": per_head(self.w_q.weight, h),
            "W_K": per_head(self.w_k.weight, g),
            "W_V": per_head(self.w_v.weight, g),
            "W_O": self.w_o.weight.detach().T.reshape(h, self.d_v, -1),  # (h, d_v, d_model)
        }

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        *,
        attn_mask: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention when key and value are omitted, cross-attention otherwise.

        query (B, n_q, d_model); key, value (B, n_k, d_kv_in).
        rotary: (cos, sin) of shape (B, n, d_k) or (n, d_k), applied to q and k (self-attention).
        need_weights: False computes with PyTorch's fused attention and returns None for the
        probabilities.
        Returns the output (B, n_q, d_model) and the probabilities (B, h, n_q, n_k).
        """
        if key is None and value is None:  # self-attention: one product for q, k, v where it can be
            q, k, v = self.project_self(query, rotary, stacked=True)  # (B, h|G|G, n, d_k|d_k|d_v)
        else:
            key = query if key is None else key
            value = key if value is None else value
            q = self.project_q(query)  # (B, h, n_q, d_k)
            k, v = self.project_kv(key, value)  # (B, G, n_k, d_k), (B, G, n_k, d_v)
            q, k = rotate_qk(q, k, rotary, self.rope)
        z, probs = self.attend(q, k, v, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                               is_causal=is_causal, need_weights=need_weights)
        return self.merge(z), probs
