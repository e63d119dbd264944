"""Token focus: for one token (or word) of a run, what it attends to and what attends to it,
in every head, with summaries over heads and over layers. Plain numpy over the run's
(layers, heads, n, n) probabilities; the figures are in `mha_viz.figures.focus`.

`attends_to[l, h, j]` is row i of head (l, h): the weight query i puts on key j.
`attended_by[l, h, j]` is column i: the weight query j puts on key i.
On the words level (`word_ids`), rows and columns are those of `detail.word_level`: sum over a
key word's pieces, mean over a query word's pieces.
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


def word_attends_to(attentions: np.ndarray, word_ids: list[int], w: int) -> np.ndarray:
    """(layers, heads, W): row w of every head's `detail.word_level` matrix, without building it."""
    groups = detail.word_groups(word_ids)
    _check_index(w, len(groups))
    rows = np.asarray(attentions)[..., groups[w], :].astype(np.float64).mean(axis=-2)  # (L, H, n): the rows first
    starts = np.array([g[0] for g in groups])
    return np.add.reduceat(rows, starts, axis=-1).astype(np.float32)


def word_attended_by(attentions: np.ndarray, word_ids: list[int], w: int) -> np.ndarray:
    """(layers, heads, W): column w of every head's `detail.word_level` matrix."""
    groups = detail.word_groups(word_ids)
    _check_index(w, len(groups))
    cols = np.asarray(attentions)[..., :, groups[w]].astype(np.float64).sum(axis=-1)  # (L, H, n): the columns first
    starts = np.array([g[0] for g in groups])
    sizes = np.array([len(g) for g in groups])
    return (np.add.reduceat(cols, starts, axis=-1) / sizes).astype(np.float32)


def focus(run, index: int, *, words: bool = False) -> Focus:
    """The Focus of token `index` of an AttentionRun, or of word `index` when `words` is set."""
    if words:
        labels = detail.word_labels(run.tokens, run.word_ids)
        return Focus(index, labels, word_attends_to(run.attentions, run.word_ids, index),
                     word_attended_by(run.attentions, run.word_ids, index), words=True, lens=run.lens)
    a = run.attentions
    return Focus(index, list(run.tokens), attends_to(a, index), attended_by(a, index), lens=run.lens)


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
