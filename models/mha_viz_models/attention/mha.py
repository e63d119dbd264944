"""Multi-head attention written out step by step, returning every head's probabilities.

The module of Vaswani et al. (2017), done properly: separate W_Q, W_K, W_V, W_O; heads as a
tensor axis; padding and causal masks; cross-attention (n_q != n_k); d_k independent of
d_model / h; grouped-query attention (num_kv_heads dividing num_heads); optional rotary
position embeddings (RoPE) applied to q and k before the scores, and what recent models add to
q, k, the mask or the softmax. Its settings: one small dataclass per variant
(`mha_viz_models.attention.config`); `MultiHeadAttention(Shape(512, 8))` is the paper's layer.

`reference_forward` is the whole layer top to bottom with no speed trick. `forward` computes the
same through the steps, which are public methods (`project_self` for q, k, v with RoPE, or
`project_q`, `project_kv` and `project_v`; `attend`; `merge`) so that adapters for pretrained
models can put a KV cache between them and the teaching view can show each intermediate tensor;
they use the speed tricks of `mha_viz_models.attention.fast_paths`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mha_viz_models.attention import fast_paths
from mha_viz_models.attention.config import Extras, Positions, Shape, Visibility
from mha_viz_models.attention.rotary import apply_rotary, query_temperature, rotate_half, rotate_qk
from mha_viz_models.attention.visibility import hidden_columns, hidden_keys, sink_column

__all__ = ["Extras", "MultiHeadAttention", "Positions", "Shape", "Visibility", "apply_rotary", "rotate_half"]


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over `num_heads` heads.

    shape: the sizes, biases, scale and dropout (`Shape(d_model, num_heads)` is the textbook's).
    positions, visibility, extras: RoPE and Llama 4's temperature; sliding windows and chunks;
    q/k norms, soft-capping and sinks (`mha_viz_models.attention.config`; None: the defaults).
    Each setting is also an attribute of the same name (`mha.d_k`, `mha.rope`, `mha.window`…).
    """

    def __init__(self, shape: Shape, positions: Positions | None = None, visibility: Visibility | None = None,
                 extras: Extras | None = None) -> None:
        super().__init__()
        positions, visibility, extras = positions or Positions(), visibility or Visibility(), extras or Extras()
        self.d_model, self.num_heads, self.num_kv_heads = shape.d_model, shape.num_heads, shape.num_kv_heads
        self.d_k, self.d_v, self.scale = shape.d_k, shape.d_v, shape.scale
        h, g, bias = shape.num_heads, shape.num_kv_heads, shape.bias
        self.w_q = nn.Linear(shape.d_model, h * shape.d_k, bias=bias)
        self.w_k = nn.Linear(shape.d_kv_in, g * shape.d_k, bias=bias)
        self.w_v = nn.Linear(shape.d_kv_in, g * shape.d_v, bias=bias)
        self.w_o = nn.Linear(h * shape.d_v, shape.d_model, bias=bias)
        self.dropout = nn.Dropout(shape.dropout)
        self.rope, self.temperature = positions.rope, positions.temperature
        self.window, self.chunk = visibility.window, visibility.chunk
        self.q_norm, self.k_norm, self.rotated_norm = extras.q_norm, extras.k_norm, extras.rotated_norm
        self.norm_over_heads, self.softcap, self.sinks = bool(extras.norm_over_heads), extras.softcap, extras.sinks
        self._stack = fast_paths.WeightStack()  # W_Q, W_K, W_V stacked for `project_qkv`

    @classmethod
    def from_linears(cls, w_q: nn.Linear, w_k: nn.Linear, w_v: nn.Linear, w_o: nn.Linear, *, num_heads: int,
                     num_kv_heads: int | None = None, scale: float | None = None, dropout: float = 0.0,
                     positions: Positions | None = None, visibility: Visibility | None = None,
                     extras: Extras | None = None) -> "MultiHeadAttention":
        """Wrap existing projection layers (the same parameters, not copies) of a trained model; the
        sizes are read off them. `extras`' norms and sinks are the model's own too."""
        kv = num_heads if num_kv_heads is None else num_kv_heads
        shape = Shape(w_q.in_features, num_heads, num_kv_heads=kv, d_k=w_q.out_features // num_heads,
                      d_v=w_v.out_features // kv, d_kv_in=w_k.in_features, bias=False, scale=scale, dropout=dropout)
        with torch.device("meta"):  # placeholders only: the real layers are put in below
            mha = cls(shape, positions, visibility, extras)
        mha.d_model = w_o.out_features
        mha.w_q, mha.w_k, mha.w_v, mha.w_o = w_q, w_k, w_v, w_o
        return mha

    # --- the reference path: the whole layer, top to bottom, no speed trick ----------------------
    def reference_forward(
        self, query: torch.Tensor, key: torch.Tensor | None = None, value: torch.Tensor | None = None, *,
        attn_mask: torch.Tensor | None = None, key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False, rotary=None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What `forward` computes (its arguments and results, with the probabilities), written as
        the textbook does; `forward` takes `fast_paths`' tricks (tests/unit/test_fast_paths.py)."""
        key = query if key is None else key
        value = key if value is None else value
        (B, n_q, _), n_k, h, g = query.shape, key.shape[1], self.num_heads, self.num_kv_heads
        # project, split heads (each through its q/k norm, if any)
        q = self.split_heads(self.w_q(query), h, self.q_norm)  # (B, h, n_q, d_k)
        k = self.split_heads(self.w_k(key), g, self.k_norm)  # (B, G, n_k, d_k)
        v = self.w_v(value).view(B, n_k, g, self.d_v).transpose(1, 2)  # (B, G, n_k, d_v)
        q, k = self.positioned(q, k, rotary)  # rotary (then a norm after it, a temperature, if any)
        k = k.repeat_interleave(h // g, dim=1)  # (B, h, n_k, d_k): query head i reads KV head i // (h / G)
        v = v.repeat_interleave(h // g, dim=1)  # (B, h, n_k, d_v)
        # scores
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale  # (B, h, n_q, n_k)
        if self.softcap is not None:  # Gemma 2: s / c, tanh, × c, in that order (as its eager code)
            scores = torch.tanh(scores / self.softcap) * self.softcap
        # mask
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            scores = scores + attn_mask  # an additive mask
        blocked = self.blocked_keys(n_q, n_k, q.device, causal=is_causal, key_padding_mask=key_padding_mask,
                                    attn_mask=attn_mask)  # bool, broadcast to (B, h, n_q, n_k), or None
        if blocked is not None:
            scores = scores.masked_fill(blocked, float("-inf"))
        if self.sinks is not None:  # their column joins the softmax, then is dropped
            scores = torch.cat((scores, sink_column(self.sinks, scores)), dim=-1)  # (B, h, n_q, n_k + 1)
        # softmax, in float32 (a row with no visible key is 0/0: zeros), without the sinks' column
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).nan_to_num(0.0)[..., :n_k]  # (B, h, n_q, n_k)
        # × V
        z = torch.matmul(self.dropout(probs).to(v.dtype), v)  # (B, h, n_q, d_v)
        # merge, W_O
        concat = z.transpose(1, 2).reshape(B, n_q, h * self.d_v)  # (B, n_q, h·d_v)
        return self.w_o(concat), probs  # (B, n_q, d_model), (B, h, n_q, n_k)

    def split_heads(self, x: torch.Tensor, heads: int, norm: nn.Module | None = None) -> torch.Tensor:
        """A q or k projection (B, n, heads·d_k) split into heads, (B, heads, n, d_k), through its
        norm (if any): over the whole projection before the split (`norm_over_heads`), else over
        each head's d_k values."""
        B, n, _ = x.shape
        flat = norm is not None and self.norm_over_heads
        x = (norm(x) if flat else x).view(B, n, heads, self.d_k)  # (B, n, heads, d_k)
        return (x if norm is None or flat else norm(x)).transpose(1, 2)  # (B, heads, n, d_k)

    def positioned(self, q: torch.Tensor, k: torch.Tensor, rotary=None,
                   past: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """q (B, h, n, d_k) and k (B, G, n, d_k) turned by RoPE when `rotary` = (cos, sin) (or
        complex angles) is given and the layer has RoPE, then through the norm after RoPE and the
        query temperature, if any. past: tokens already in the KV cache (the temperature depends
        on position)."""
        q, k = rotate_qk(q, k, rotary, self.rope)
        if self.rotated_norm is not None:
            q, k = self.rotated_norm(q), self.rotated_norm(k)
        if self.temperature is not None:
            scale = query_temperature(q.shape[-2], past, *self.temperature, device=q.device)  # (n, 1)
            q = (q * scale).to(q.dtype)
        return q, k

    def blocked_keys(self, n_q: int, n_k: int, device=None, *, causal: bool,
                     key_padding_mask: torch.Tensor | None = None,
                     attn_mask: torch.Tensor | None = None) -> torch.Tensor | None:
        """Bool, broadcastable to (B, h, n_q, n_k), True where a query may not see a key: the causal
        mask, window and chunk (`hidden_keys`), padded keys and a bool `attn_mask`'s False; None
        when nothing is blocked (an additive `attn_mask` blocks nothing here: it is added)."""
        blocked = self.hidden_keys(n_q, n_k, device, causal=causal)  # (n_q, n_k) bool, or None
        if key_padding_mask is not None:
            pad = key_padding_mask.to(torch.bool)[:, None, None, :]  # (B, 1, 1, n_k)
            blocked = pad if blocked is None else blocked | pad
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            blocked = ~attn_mask if blocked is None else blocked | ~attn_mask
        return blocked

    def hidden_keys(self, n_q: int, n_k: int, device=None, *, causal: bool = True) -> torch.Tensor | None:
        """(n_q, n_k) bool, True where the causal mask, this layer's sliding window or its chunk hides key j
        from query i (`mha_viz_models.attention.visibility.hidden_keys`); None when nothing is hidden."""
        return hidden_keys(n_q, n_k, device, causal=causal, window=self.window, chunk=self.chunk)

    # --- the steps, with the speed tricks (fast_paths) -------------------------------------------
    def project_q(self, query: torch.Tensor) -> torch.Tensor:
        """(B, n_q, d_model) -> (B, h, n_q, d_k)."""
        return self.split_heads(self.w_q(query), self.num_heads, self.q_norm)  # (B, h, n_q, d_k)

    def project_kv(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, n_k, d_kv_in) twice -> k (B, G, n_k, d_k), v (B, G, n_k, d_v)."""
        # (B, G, n_k, d_k), (B, G, n_k, d_v)
        return self.split_heads(self.w_k(key), self.num_kv_heads, self.k_norm), self.project_v(value)

    def project_v(self, value: torch.Tensor) -> torch.Tensor:
        """(B, n_k, d_kv_in) -> v (B, G, n_k, d_v), the values alone (what the heads write:
        `mha_viz_models.reading.values`)."""
        B, n_k, _ = value.shape
        return self.w_v(value).view(B, n_k, self.num_kv_heads, self.d_v).transpose(1, 2)  # (B, G, n_k, d_v)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's q, k, v from one product with W_Q, W_K, W_V stacked (`fast_paths.WeightStack`):
        (B, n, d_model) -> (B, h, n, d_k), (B, G, n, d_k), (B, G, n, d_v)."""
        B, n, _ = x.shape
        qkv = F.linear(x, *self._stack((self.w_q, self.w_k, self.w_v)))  # (B, n, h·d_k + G·d_k + G·d_v)
        h, g = self.num_heads, self.num_kv_heads
        q, k, v = qkv.split([h * self.d_k, g * self.d_k, g * self.d_v], dim=-1)
        return (self.split_heads(q, h, self.q_norm),  # (B, h, n, d_k)
                self.split_heads(k, g, self.k_norm),  # (B, G, n, d_k)
                v.view(B, n, g, self.d_v).transpose(1, 2))  # (B, G, n, d_v)

    def project_self(self, x: torch.Tensor, rotary=None, *, stacked: bool = False,
                     past: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention's q, k, v from one input, through `positioned` (RoPE, the norm after it,
        the temperature): (B, n, d_model) -> q (B, h, n, d_k), k (B, G, n, d_k), v (B, G, n, d_v).
        past: tokens already in the KV cache (the temperature depends on position).

        stacked: one product with W_Q, W_K, W_V stacked (`project_qkv`, faster; what `forward`
        uses) where the three projections allow it; otherwise three products (`project_q`,
        `project_kv`), which round exactly as Hugging Face's attention does (what the adapters
        use, so that their probabilities are bit-identical to eager attention's).
        """
        if stacked and fast_paths.WeightStack.applies((self.w_q, self.w_k, self.w_v)):
            q, k, v = self.project_qkv(x)  # (B, h, n, d_k), (B, G, n, d_k), (B, G, n, d_v)
        else:
            q = self.project_q(x)  # (B, h, n, d_k)
            k, v = self.project_kv(x, x)  # (B, G, n, d_k), (B, G, n, d_v)
        q, k = self.positioned(q, k, rotary, past)
        return q, k, v

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Scaled scores (B, h, n_q, n_k) of q (B, h, n_q, d_k) against k (B, h, n_k, d_k), soft-
        capped when the head is (before any mask), as `attend` computes them: bit for bit Hugging
        Face's eager attention's (`fast_paths.scaled_scores`)."""
        scores = fast_paths.scaled_scores(q, k, self.scale)  # (B, h, n_q, n_k)
        if self.softcap is not None:  # Gemma 2: s / c, tanh, × c, in that order (as its eager code)
            scores = torch.tanh(scores / self.softcap) * self.softcap
        return scores

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
        """Scores, masks, softmax and weighted sum for all heads at once (`reference_forward`'s
        middle, with the tricks of `fast_paths`).

        q: (B, h, n_q, d_k); k: (B, G, n_k, d_k); v: (B, G, n_k, d_v).
        attn_mask: broadcastable to (B, h, n_q, n_k); bool (True = may attend) or float (added
            to the scores, -inf or a large negative number to block).
        key_padding_mask: (B, n_k) bool, True where the key is padding (PyTorch's convention).
        is_causal: query i sees keys j <= i + (n_k - n_q) (the last n_q positions of the keys).
        need_weights: False hands the same computation to PyTorch's fused
            `scaled_dot_product_attention` (`fast_paths.fused_attention`: no (n_q, n_k) matrix is
            kept) and returns None for the probabilities.
        heads: which heads q holds, when only some (their sink logits are read); None: all.
        Returns z (B, h, n_q, d_v), the heads' outputs before concatenation, and the
        probabilities (B, h, n_q, n_k). A query row with no visible key gets zeros in both.
        With sinks, rows sum to less than 1: the rest is the sink's.
        """
        if not need_weights:
            return fast_paths.fused_attention(self, q, k, v, attn_mask, key_padding_mask, is_causal), None
        group = q.shape[1] // k.shape[1]  # 1 when the caller already matched heads (a subset)
        if group > 1:  # query head i reads KV head i // group
            k = k.repeat_interleave(group, dim=1)  # (B, h, n_k, d_k)
            v = v.repeat_interleave(group, dim=1)  # (B, h, n_k, d_v)
        n_q, n_k = q.shape[-2], k.shape[-2]
        blocked = self.blocked_keys(n_q, n_k, q.device, causal=is_causal, key_padding_mask=key_padding_mask,
                                    attn_mask=attn_mask)  # bool, broadcast to (B, h, n_q, n_k), or None
        additive = attn_mask if attn_mask is not None and attn_mask.dtype != torch.bool else None
        probs = self.probabilities(q, k, blocked, additive, heads=heads)  # (B, h, n_q, n_k), float32
        z = torch.matmul(self.dropout(probs).to(v.dtype), v)  # (B, h, n_q, d_v), in the model's dtype
        return z, probs

    def probabilities(self, q: torch.Tensor, k: torch.Tensor, blocked: torch.Tensor | None,
                      additive: torch.Tensor | None = None, *, heads: list[int] | None = None) -> torch.Tensor:
        """`attend`'s probabilities (B, h, n_q, n_k), float32, of q (B, h, n_q, d_k) against k (B, h,
        n_k, d_k) (one KV head a query head already): the scores, −inf where `blocked`, `additive`
        added, then `normalized`."""
        scores = fast_paths.masked_in_place(self.scores(q, k), blocked, additive)  # (B, h, n_q, n_k)
        return self.normalized(scores, heads=heads, empty_rows=blocked is not None or additive is not None)

    def normalized(self, scores: torch.Tensor, *, heads: list[int] | None = None,
                   empty_rows: bool = True) -> torch.Tensor:
        """Masked scores (B, h, n_q, n_k) to probabilities, float32, in their memory where it can be: the
        sinks' column (of `heads`) joins the softmax and is dropped; with `empty_rows`, a row with no
        visible key (0/0) becomes zeros."""
        if self.sinks is not None:  # their column joins the softmax, then is dropped
            scores = torch.cat((scores, sink_column(self.sinks, scores, heads)), dim=-1)  # (B, h, n_q, n_k + 1)
        probs = fast_paths.softmax_in_place(scores)  # (B, h, n_q, n_k[+1]), float32
        if empty_rows:
            probs = fast_paths.zero_empty_rows(probs)
        if self.sinks is not None:
            probs = probs[..., :-1]  # (B, h, n_q, n_k): the sinks' share is what the rows lack
        return probs

    def row_probabilities(self, q: torch.Tensor, k: torch.Tensor, *, first: int, key_start: int = 0,
                          is_causal: bool, heads: list[int] | None = None) -> torch.Tensor:
        """The probabilities (B, h, n_q, n_k) of a block of queries, q (B, h, n_q, d_k) at positions
        first … first + n_q − 1, against keys k (B, G, n_k, d_k) at positions key_start …, G dividing h
        (query head i reads KV head i // (h / G)): what `attend` gives those rows of an unpadded text, when
        the keys hold every key they may see (`visibility.visible_span`). For a long text, a block at a time:
        the query heads of a KV head are scored in one product, which reads their keys once.
        heads: which heads q holds, when only some (their sink logits are read); None: all.
        Every query sees its own key (no mask hides it), so no row is empty."""
        (B, h, n_q, d), (g, n_k) = q.shape, (k.shape[1], k.shape[2])
        where = dict(causal=is_causal, window=self.window, chunk=self.chunk, first=first, key_start=key_start)
        columns = hidden_columns(n_q, n_k, **where)  # (lo, hi): the columns that hold every hidden key
        blocked = None if columns is None else hidden_keys(  # the mask of those columns alone (n_q, hi − lo):
            n_q, columns[1] - columns[0], q.device, **{**where, "key_start": key_start + columns[0]})  # a causal
        # block's is its diagonal square (the whole (n_q, n_k) masks took 35 ms of one head's 0.32 s recomputed at
        # 8,192 tokens of SmolLM2, under cProfile)
        scores = self.scores(q.reshape(B, g, (h // g) * n_q, d), k).view(B, h, n_q, n_k)  # (B, h, n_q, n_k)
        masked = fast_paths.masked_columns_in_place(scores, blocked, columns)
        return self.normalized(masked, heads=heads, empty_rows=False)

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
        """Self-attention when key and value are omitted, cross-attention otherwise: what
        `reference_forward` computes, through the steps and their speed tricks.

        query (B, n_q, d_model); key, value (B, n_k, d_kv_in).
        rotary: (cos, sin) of shape (B, n, d_k) or (n, d_k), applied to q and k.
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
            q, k = self.positioned(q, k, rotary)
        z, probs = self.attend(q, k, v, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                               is_causal=is_causal, need_weights=need_weights)
        return self.merge(z), probs
