"""Heads found from two tokens: every head of a run ranked by the weight one query token puts on one
key token, A[layer, head, query, key] ("which heads look from *it* to *animal*?"). Plain numpy over
the query's row of every head (`AttentionRun.layer_rows`: a long run recomputes that row only); Token focus
draws the top of the ranking (`mha_viz.drawing.focus.ranked_heads`); its *Strongest* line names the first.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mha_viz.views import detail
from mha_viz.views.focus import run_rows


class HeadWeight(NamedTuple):
    """One head of a ranking: `layer` a row of the run (the model's layer number is
    `run.layer_ids[layer]`), `head`, and the weight the query puts on the key there."""

    layer: int
    head: int
    weight: float


def pair_weights(run, query: int, key: int, *, words: bool = False) -> np.ndarray:
    """(layers, heads): the weight position `query` puts on position `key` in every head of an
    AttentionRun; with `words`, positions are words and the weights those of the head view's words
    level (mean over the query word's pieces, sum over the key word's pieces)."""
    size = len(detail.word_groups(run.word_ids)) if words else run.n
    for name, position in (("query", query), ("key", key)):
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
            raise TypeError(f"{name} must be a position (an int), not {position!r}")
        if not 0 <= position < size:
            raise IndexError(f"{name} {position} is out of range for {size} {'words' if words else 'tokens'}")
    if words:
        return np.asarray(run_rows(run, int(query), words=True)[..., int(key)], dtype=np.float32)
    return np.stack([run.layer_rows(layer, int(query), int(query) + 1)[:, 0, int(key)]  # one row a head
                     for layer in range(run.num_layers)]).astype(np.float32)


def heads_from_tokens(run, query: int, key: int, *, words: bool = False, top: int | None = None) -> list[HeadWeight]:
    """Every head of an AttentionRun ranked by the weight token `query` puts on token `key`, largest
    first (equal weights in layer, then head, order): [HeadWeight(layer, head, weight), …], `top` of
    them (None: all). `words`: `query` and `key` are words (`pair_weights`). IndexError for a
    position past the run, ValueError for a `top` below 1."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1):
        raise ValueError(f"top must be a whole number of heads from 1 up, or None, not {top!r}")
    return rank_heads(pair_weights(run, query, key, words=words), top)


def rank_heads(w: np.ndarray, top: int | None = None) -> list[HeadWeight]:
    """(layers, heads) weights (`pair_weights`, or a Focus's `attends_to[..., key]`) as `heads_from_tokens`
    ranks them: largest first, equal weights in layer, then head, order; `top` of them (None: all)."""
    w = np.asarray(w, dtype=np.float32)
    order = np.argsort(-w.ravel(), kind="stable")[:top]
    heads = w.shape[1]
    return [HeadWeight(int(i) // heads, int(i) % heads, float(w.flat[i])) for i in order]
