"""Token focus: for one token (or word) of a run, what it attends to and what attends to it,
in every head, with summaries over heads and over layers. Plain numpy; the figures are in
`mha_viz.drawing.focus`.

`attends_to[l, h, j]` is row i of head (l, h): the weight query i puts on key j.
`attended_by[l, h, j]` is column i: the weight query j puts on key i.
On the words level (`word_ids`), rows and columns are those of `detail.word_level`: sum over a
key word's pieces, mean over a query word's pieces.

Every run (`focus`): the rows are read a layer at a time (`AttentionRun.layer_rows`: one projection of a
long run's layer). A column is every row of every head, which a long run would recompute whole (at 8,192
tokens on SmolLM2 a full scan, tens of seconds): a long run's *attended by* is the scan's kept keys
(`Scan.top`: each query's heaviest keys of weight ≥ its `min_weight`, exact weights), smaller weights
counted as 0, except the strongest head's column, read exactly (`AttentionRun.column`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz.views import detail

TO, BY = "attends to", "attended by"
DIRECTIONS = (TO, BY)


@dataclass(frozen=True)
class Focus:
    """One token's (or word's) attention in every head: (layers, heads, m) for each direction,
    m = tokens or words, and the labels of the m positions."""

    index: int
    labels: list[str]
    attends_to: np.ndarray
    attended_by: np.ndarray
    words: bool = False
    lens: str = ""  # the run's (`HeadArray.lens`): what the weights are when not attention weights
    # whether `attended_by` is exact in every head; a long run's counts only each query's kept keys
    # (`run_columns`) but in `exact_head` (layer row, head), read exactly
    by_exact: bool = True
    exact_head: tuple[int, int] | None = None

    def values(self, direction: str) -> np.ndarray:
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
        return self.attends_to if direction == TO else self.attended_by


def attends_to(attentions: np.ndarray, i: int) -> np.ndarray:
    """(layers, heads, n): row i of every head, what query i attends to."""
    a = np.asarray(attentions)
    _check_index(i, a.shape[-1])
    return a[..., i, :]


def attended_by(attentions: np.ndarray, i: int) -> np.ndarray:
    """(layers, heads, n): column i of every head, how much each query attends to key i."""
    a = np.asarray(attentions)
    _check_index(i, a.shape[-1])
    return a[..., :, i]


def _positions(run, index: int, words: bool) -> tuple[list[str], list[np.ndarray]]:
    """(labels, groups): the positions' labels and each one's token positions (one token a group on
    the tokens level); IndexError for an index past them."""
    if words:
        labels, groups = detail.word_labels(run.tokens, run.word_ids), detail.word_groups(run.word_ids)
    else:
        labels, groups = list(run.tokens), [np.array([i]) for i in range(run.n)]
    _check_index(index, len(groups))
    return labels, groups


def _by_groups(values: np.ndarray, groups: list[np.ndarray], words: bool) -> np.ndarray:
    """(…, n) per-token values -> (…, m): the mean over each group's tokens (the words level's query
    pieces), or the values themselves on the tokens level."""
    if not words:
        return np.asarray(values, dtype=np.float32)
    starts = np.array([g[0] for g in groups])
    sizes = np.array([len(g) for g in groups])
    return (np.add.reduceat(np.asarray(values, dtype=np.float64), starts, axis=-1) / sizes).astype(np.float32)


def run_rows(run, index: int, *, words: bool = False) -> np.ndarray:
    """(layers, heads, m): what token (or word) `index` attends to in every head, from its rows only
    (`layer_rows`, one call a layer): row `index` of every head, or on the words level the word's rows
    averaged and its keys summed by word."""
    _labels, groups = _positions(run, index, words)
    rows = groups[index]
    per_token = np.stack([run.layer_rows(layer, int(rows[0]), int(rows[-1]) + 1).mean(axis=1, dtype=np.float64)
                          for layer in range(run.num_layers)])  # (L, H, n): the rows first
    if not words:
        return per_token.astype(np.float32)
    return np.add.reduceat(per_token, np.array([g[0] for g in groups]), axis=-1).astype(np.float32)


def kept_columns(summary, keys: np.ndarray) -> np.ndarray:
    """float64 (layers, heads, n): the weight each query of a scan (`mha_viz.Scan`) puts on `keys` (contiguous
    positions), summed, counting only its kept keys (its `top_k` heaviest of weight ≥ `min_weight`; the others as
    0). One pass over the kept keys (a float32 sum of at most `top_k` weights a query: within a few 1e-7 of float64's):
    a `where` then a sum over each query's few keys took 2.5 × as long at 8,192 tokens of SmolLM2."""
    lo, hi = int(np.min(keys)), int(np.max(keys))  # a token, or a word's pieces: contiguous
    hit = summary.keys == lo if lo == hi else (summary.keys >= lo) & (summary.keys <= hi)
    return np.einsum("...k,...k->...", summary.weights, hit, dtype=np.float32).astype(np.float64)


def _exact_column(run, layer: int, head: int, keys: np.ndarray) -> np.ndarray:
    """float64 (n,): the weight each query of one head puts on `keys`, summed, read exactly."""
    return np.sum([run.column(layer, head, int(k)) for k in keys], axis=0, dtype=np.float64)


def run_columns(run, index: int, *, words: bool = False) -> tuple[np.ndarray, tuple[int, int] | None]:
    """((layers, heads, m), exact head): what attends to token (or word) `index` in every head. A dense
    run's exact columns (exact head None); a long run's from its scan's kept keys (`kept_columns`), except
    the head where the strongest of them lies (the position itself left out), whose column is read exactly
    (`run.column`) and which is returned as (layer row, head)."""
    _labels, groups = _positions(run, index, words)
    keys = groups[index]
    if run.is_dense or run.summary is None:
        a = run.attentions
        return _by_groups(a[..., :, keys].sum(axis=-1, dtype=np.float64), groups, words), None
    by = _by_groups(kept_columns(run.summary, keys), groups, words)
    ranked = by.copy()
    if ranked.shape[-1] > 1:
        ranked[..., index] = -np.inf
    layer, head = np.unravel_index(int(np.argmax(ranked.max(axis=-1))), ranked.shape[:2])
    by[layer, head] = _by_groups(_exact_column(run, int(layer), int(head), keys), groups, words)
    return by, (int(layer), int(head))


def focus(run, index: int, *, words: bool = False) -> Focus:
    """The Focus of token `index` of an AttentionRun, or of word `index` when `words` is set (see
    `run_rows`, `run_columns`: a long run's *attended by* counts its kept keys only, `Focus.by_exact`)."""
    labels, _groups = _positions(run, index, words)
    by, exact = run_columns(run, index, words=words)
    return Focus(index, labels, run_rows(run, index, words=words), by, words=words, lens=run.lens,
                 by_exact=exact is None, exact_head=exact)


@dataclass(frozen=True)
class Summary:
    """Mean and max of one direction's values over heads (per layer: (layers, m)) and over
    layers (per head: (heads, m)), and the single strongest weight: head (layer row, head),
    position and weight."""

    mean_over_heads: np.ndarray
    max_over_heads: np.ndarray
    mean_over_layers: np.ndarray
    max_over_layers: np.ndarray
    head_max: np.ndarray  # (layers, heads): each head's largest weight in this direction
    top_layer: int
    top_head: int
    top_position: int
    top_weight: float


def summarize(values: np.ndarray, *, exclude: int | None = None) -> Summary:
    """Summaries of (layers, heads, m) values. `exclude`: a position left out of the head
    maximum and the strongest weight (e.g. the focused token itself), when m > 1."""
    v = np.asarray(values, dtype=np.float32)
    if v.ndim != 3 or v.shape[-1] == 0:
        raise ValueError(f"expected (layers, heads, m) values with m ≥ 1, got shape {v.shape}")
    ranked = v
    if exclude is not None and v.shape[-1] > 1:
        ranked = v.copy()
        ranked[..., exclude] = -np.inf
    head_max = ranked.max(axis=-1)
    layer, head, pos = np.unravel_index(int(np.argmax(ranked)), ranked.shape)
    return Summary(v.mean(axis=1), v.max(axis=1), v.mean(axis=0), v.max(axis=0),
                   head_max, int(layer), int(head), int(pos), float(v[layer, head, pos]))


def _check_index(i: int, m: int) -> None:
    if not 0 <= i < m:
        raise IndexError(f"position {i} out of range for {m} positions")
