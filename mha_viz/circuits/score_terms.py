"""Why a head looks where it looks: the score q_i · k_j of one query–key pair split into a matrix of
terms, query-side part × key-side part (`qk_terms`), and the same parts for a whole head's pattern on a
text, each term weighted by the head's own attention (`qk_pattern_terms`).

Every norm that reads the stream before W_Q and W_K (LayerNorm, RMSNorm, the per-head q/k norms of
Gemma 3 and Qwen3, OLMo 2's q/k norm over all heads, a post-norm model's norms) is frozen at the scale it
had in this run; then q and k are linear in what each earlier component wrote, RoPE is linear at each
position, and the terms sum to the score. `error` says how close they come, and is always shown."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_viz.budget import memory
from mha_viz.budget.plan import Plan
from mha_viz.circuits.sides import side
from mha_viz.text.tokenize import InputError, tokenize
from mha_viz_models.attention import fast_paths
from mha_viz_models.attention.heads import kv_head
from mha_viz_models.attention.visibility import hidden_keys
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.reading import stream

PATTERN_TOKENS = 1024  # the whole head's terms hold every part at every position, on each side
FROZEN = ("Every norm before W_Q and W_K (the layer norms, the q/k norms) is frozen at the scale it had in this "
          "run, so the terms add up to the score.")


@dataclass(frozen=True)
class QKTerms:
    """The score of head (layer, head) for query `query` and key `key` (or, `pattern`, its pattern-weighted
    mean Σ_i Σ_j A_ij s_ij / n, `key` −1) split into terms[a, b] = part a of the query · part b of the key
    × the model's scale, float64 (len(query_parts), len(key_parts)); Σ terms = score up to `error`,
    |Σ terms − score| / max(|score|, 1). `softcap`: the cap the model applies to scores after this (Gemma
    2: tanh(s / c) · c), or None; `visible`: whether the mask lets the query see the key."""

    layer: int
    head: int
    query: int
    key: int
    tokens: list[str]
    score: float
    query_parts: list[str]
    key_parts: list[str]
    terms: np.ndarray
    error: float
    softcap: float | None = None
    visible: bool = True
    pattern: bool = False
    other_key: int = -1  # `minus`: the key subtracted (−1: none)

    def query_totals(self) -> np.ndarray:
        """Each query part's row sum: how the score changes when that part's write is taken out of the query."""
        return self.terms.sum(1)

    def key_totals(self) -> np.ndarray:
        """Each key part's column sum."""
        return self.terms.sum(0)

    def minus(self, other: "QKTerms") -> "QKTerms":
        """Why this key and not `other`'s (the same query and head): the difference of the two keys' terms,
        which is what the softmax compares."""
        if (other.layer, other.head, other.query) != (self.layer, self.head, self.query) or other.pattern:
            raise ValueError("the two splits must be of the same head and query")
        if other.key_parts != self.key_parts or other.query_parts != self.query_parts:
            raise ValueError("the two splits must have the same parts")
        return QKTerms(self.layer, self.head, self.query, self.key, self.tokens, self.score - other.score,
                       self.query_parts, self.key_parts, self.terms - other.terms, max(self.error, other.error),
                       self.softcap, self.visible and other.visible, other_key=other.key)

    def top(self, k: int = 15) -> tuple[list[str], list[str], np.ndarray]:
        """The k largest query parts by the k largest key parts (by |row sum|, |column sum|) and an "other"
        row and column holding the rest, so the small matrix still sums to the score."""
        rows = _largest(self.query_totals(), k)
        cols = _largest(self.key_totals(), k)
        small = _fold(_fold(self.terms, rows, 0), cols, 1)
        names_q = [self.query_parts[i] for i in rows] + (["other"] if len(rows) < len(self.query_parts) else [])
        names_k = [self.key_parts[i] for i in cols] + (["other"] if len(cols) < len(self.key_parts) else [])
        return names_q, names_k, small


def _largest(totals: np.ndarray, k: int) -> list[int]:
    return sorted(np.argsort(-np.abs(totals), kind="stable")[:k].tolist())


def _fold(m: np.ndarray, keep: list[int], axis: int) -> np.ndarray:
    rest = np.setdiff1d(np.arange(m.shape[axis]), keep)
    kept = np.take(m, keep, axis=axis)
    if not len(rest):
        return kept
    return np.concatenate([kept, np.take(m, rest, axis=axis).sum(axis=axis, keepdims=True)], axis=axis)


def _read(model, text: str, layer: int, head: int, max_tokens: int | None, pair: tuple[int, int] | None = None):
    """The text's tokens, with the head, the model's stream, the positions (the pair's two, or every position for
    the whole head) checked: (layouts, tokens, positions or None)."""
    layers = [int(n) for n in getattr(model, "layer_ids", range(model.num_layers))]  # a hybrid's softmax layers
    if layer not in layers or not 0 <= head < model.num_heads:
        raise InputError(f"Head ({layer}, {head}) does not exist: {model.name} has {model.num_heads} heads in each "
                         f"of its attention layers {', '.join(map(str, layers))}." if len(layers) < 12 else
                         f"Head ({layer}, {head}) does not exist: {model.name} has {model.num_layers} layers of "
                         f"{model.num_heads} heads.")
    try:
        layouts = stream.layout(model)
    except UnsupportedArchitecture as exc:
        raise InputError(str(exc)) from exc
    toks = tokenize(model, text, max_tokens)
    n = toks.n
    if pair is None and n > PATTERN_TOKENS:
        raise InputError(f"The whole head's terms read every pair of tokens: at most {PATTERN_TOKENS:,} tokens, and "
                         f"this text has {n:,}. Split one query–key pair instead, or use a shorter text.")
    positions = None
    if pair is not None:
        if not (-n <= pair[0] < n and -n <= pair[1] < n):
            raise InputError(f"Positions ({pair[0]}, {pair[1]}) are outside the text's {n} tokens.")
        positions = torch.tensor(sorted({pair[0] % n, pair[1] % n}))
    return layouts, toks, positions


def _real_qk(model, rec, layer: int, head: int):
    """q (n, d_k) of `head` and k (n, d_k) of its KV head as the model computes them (our MHA on the
    recorded input: projections, q/k norms, RoPE), and the layer's MHA."""
    mha = model.layer_adapter(layer).mha
    inp = rec.inputs[layer]
    with model.lock, torch.inference_mode():
        q, k, _ = mha.project_self(inp.hidden[:1], inp.position_embeddings)  # (1, H, n, d_k), (1, G, n, d_k)
    return q[0, head], k[0, kv_head(head, model.num_heads, model.num_kv_heads)], mha


def plan_qk_terms(model, text: str, layer: int, head: int, query: int, key: int, *,
                  max_tokens: int | None = None) -> Plan[QKTerms]:
    """`qk_terms` planned (`budget.plan`): the text read and the pair checked once, its need `need_bytes`'s. Raises
    as `qk_terms` does, before anything runs."""
    layouts, toks, positions = _read(model, text, layer, head, max_tokens, (query, key))
    return Plan(toks.n, memory.Need(host=need_bytes(model, toks.n, pattern=False)),
                lambda: _pair_terms(model, layouts, toks, positions, layer, head, query, key))


def qk_terms(model, text: str, layer: int, head: int, query: int, key: int, *,
             max_tokens: int | None = None) -> QKTerms:
    """The score of head (`layer`, `head`) for query position `query` and key position `key` (negative:
    from the end) on `text`, split into query-side part × key-side part (`QKTerms`).

    Parts: "embed" (token embeddings, with position embeddings where the model adds them), "L{l}H{h}" for
    every head of an earlier layer, "L{l} MLP", "L{l} attn bias" (W_O's bias), a post-norm model's "L{l}
    attn norm bias" and "L{l} MLP norm bias", and "bias" (W_Q's or W_K's bias, with the input norm's β).
    Every norm before W_Q and W_K is frozen at this run's scale (module docstring). Raises InputError for
    positions outside the text, or a model whose stream cannot be split (the reason named)."""
    return plan_qk_terms(model, text, layer, head, query, key, max_tokens=max_tokens).run()


def _pair_terms(model, layouts, toks, positions, layer: int, head: int, query: int, key: int) -> QKTerms:
    rec = stream.record(model, torch.tensor([toks.ids]), layer, positions)
    n = toks.n
    i, j = query % n, key % n
    q_side = side(model, layouts, rec, layer, head, "q", torch.tensor([i]))
    kv = kv_head(head, model.num_heads, model.num_kv_heads)
    k_side = side(model, layouts, rec, layer, kv, "k", torch.tensor([j]))
    q, k, mha = _real_qk(model, rec, layer, head)  # at the record's rows
    a, b = (int(r) for r in rec.local(torch.tensor([i, j])))
    with torch.inference_mode():
        score = float(fast_paths.scaled_scores(q[None, None, a:a + 1], k[None, None, b:b + 1], mha.scale))
    terms = (q_side.parts[:, 0] @ k_side.parts[:, 0].T * mha.scale).numpy()  # (Pq, Pk)
    hidden = hidden_keys(1, 1, causal=model.is_causal, window=mha.window, chunk=mha.chunk, first=i, key_start=j)
    visible = hidden is None or not bool(hidden[0, 0])  # one cell of the mask, not n × n
    return QKTerms(layer, head, i, j, list(toks.display), score, q_side.names, k_side.names, terms,
                   _error(terms, score), mha.softcap, visible)


def plan_qk_pattern_terms(model, text: str, layer: int, head: int, *,
                          max_tokens: int | None = None) -> Plan[QKTerms]:
    """`qk_pattern_terms` planned (`budget.plan`): the text read and checked once, its need `need_bytes`'s. Raises
    as `qk_pattern_terms` does, before anything runs."""
    layouts, toks, _ = _read(model, text, layer, head, max_tokens)
    return Plan(toks.n, memory.Need(host=need_bytes(model, toks.n, pattern=True)),
                lambda: _pattern_terms(model, layouts, toks, layer, head))


def qk_pattern_terms(model, text: str, layer: int, head: int, *, max_tokens: int | None = None) -> QKTerms:
    """What drives head (`layer`, `head`)'s pattern on `text`: the parts of `qk_terms`, each term weighted by
    the head's own attention, Σ_i Σ_j A_ij · T_ij / n (n: the text's tokens); `score` is Σ_i Σ_j A_ij s_ij / n
    and `pattern` True. Up to PATTERN_TOKENS tokens (InputError beyond)."""
    return plan_qk_pattern_terms(model, text, layer, head, max_tokens=max_tokens).run()


def _pattern_terms(model, layouts, toks, layer: int, head: int) -> QKTerms:
    rec = stream.record(model, torch.tensor([toks.ids]), layer, None)
    n = toks.n
    every = torch.arange(n)
    q_side = side(model, layouts, rec, layer, head, "q", every)  # (Pq, n, d_k)
    kv = kv_head(head, model.num_heads, model.num_kv_heads)
    k_side = side(model, layouts, rec, layer, kv, "k", every)  # (Pk, n, d_k)
    q, k, mha = _real_qk(model, rec, layer, head)
    with model.lock, torch.inference_mode():
        probs = mha.row_probabilities(q[None, None], k[None, None], first=0, is_causal=model.is_causal,
                                      heads=[head])[0, 0].to(torch.float64).cpu()  # (n, n)
        scores = fast_paths.scaled_scores(q[None, None], k[None, None], mha.scale)[0, 0].to(torch.float64).cpu()
    score = float((probs * scores).sum() / n)
    weighted_keys = torch.einsum("ij,bjd->bid", probs, k_side.parts)  # (Pk, n, d_k): Σ_j A_ij k_j^b
    terms = (torch.einsum("aid,bid->ab", q_side.parts, weighted_keys) * mha.scale / n).numpy()
    return QKTerms(layer, head, -1, -1, list(toks.display), score, q_side.names, k_side.names, terms,
                   _error(terms, score), mha.softcap, True, pattern=True)


def need_bytes(model, n: int, *, pattern: bool) -> int:
    """Host bytes a split holds at its peak, about: the lean forward's layer inputs and activations (one
    d_model row a position a layer, a few times), and for the whole head its parts at every position
    (every part, n, d_k, float64, on each side, and the weighted keys)."""
    parts = model.num_layers * (model.num_heads + 3) + 2
    forward = 4 * model.num_layers * n * model.d_model * 4
    return forward + (3 * parts * n * model.d_k * 8 if pattern else 0)


def _error(terms: np.ndarray, score: float) -> float:
    return float(abs(terms.sum() - score) / max(abs(score), 1.0))
