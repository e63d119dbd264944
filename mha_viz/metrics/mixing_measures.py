"""The measures of a hybrid's other token-mixing layers (issue 55): a head or channel group's exact effective
attention A (`mha_viz.effective`) is signed and its rows do not sum to 1, so the softmax heads' measures do not
apply as they are. These read where a row's weight lies, whatever its sign: each row is |A| normalised to sum to
1, P[t, s] = |A[t, s]| / Σ_s' |A[t, s']| (a row with no weight at all is left out), and

- `distance`: mean_t Σ_s P[t, s] · |t − s|, as the softmax heads' distance;
- `prev_token_score`, `induction_score`: the head detector's score on P, Σ(P ⊙ T) / ΣP with the softmax heads'
  target cells T (`head_stats.target_pairs`: the previous token; the token after an earlier copy of this one);
- `decay_length`: mean_t of the fewest keys back d such that the keys within d of t hold at least 1 − 1/e of
  row t's weight: for weights decaying as λ^(t − s) it is ⌈−1/ln λ⌉ − 1 on long rows, the e-folding length.

docs/head-metrics.md defines them; `effective_measures` gives every group's, in the model's layer order."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_viz.metrics.head_stats import target_pairs
from mha_viz.metrics.row_measures import token_keys

EFFECTIVE_MEASURES = ("distance", "prev_token_score", "induction_score", "decay_length")
DECAY_MASS = 1 - np.exp(-1.0)  # the share of a row's weight within its decay length


def normalised(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P, live): (G, n, n) |A| with each row summed to 1, and (G, n) which rows hold any weight (the others
    are 0 in P and left out of every measure)."""
    weight = np.abs(np.asarray(matrix, dtype=np.float64))
    total = weight.sum(axis=-1)
    live = total > 0
    return weight / np.where(live, total, 1.0)[..., None], live


def _mean_over_live(per_row: np.ndarray, live: np.ndarray) -> np.ndarray:
    count = live.sum(axis=-1)
    return np.where(count > 0, (per_row * live).sum(axis=-1) / np.maximum(count, 1), np.nan)


def decay_lengths(p: np.ndarray) -> np.ndarray:
    """(G, n): each row's fewest keys back d whose weight (keys t − d … t, and any past t within d) reaches
    DECAY_MASS of the row's; P as `normalised` gives it."""
    g, n, _ = p.shape
    t = np.arange(n)[:, None]
    d = np.arange(n)[None, :]
    back = np.take_along_axis(p, np.broadcast_to(np.clip(t - d, 0, None), (g, n, n)), axis=-1) * (d <= t)
    ahead = np.take_along_axis(p, np.broadcast_to(np.clip(t + d, None, n - 1), (g, n, n)), axis=-1) \
        * ((t + d <= n - 1) & (d > 0))
    within = np.cumsum(back + ahead, axis=-1)  # (G, n, n): weight within d of t
    return np.argmax(within >= DECAY_MASS - 1e-9, axis=-1).astype(np.float64)


def group_measures(matrix: np.ndarray, ids: np.ndarray) -> dict[str, np.ndarray]:
    """Every measure of EFFECTIVE_MEASURES for each group of one layer: (G, n, n) signed matrix, the tokens' ids
    (`row_measures.token_keys`) -> {measure: (G,) float64}, NaN for a group with no weight. One group at a time:
    its temporaries are a few n × n arrays, not G of them."""
    n = matrix.shape[-1]
    gap = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    targets = target_pairs(np.asarray(ids))
    out = {name: np.full(matrix.shape[0], np.nan) for name in EFFECTIVE_MEASURES}
    for g in range(matrix.shape[0]):
        p, live = normalised(matrix[g:g + 1])
        out["distance"][g] = _mean_over_live((p * gap).sum(axis=-1), live)[0]
        mass = live.sum()
        for name in ("prev_token_score", "induction_score"):
            rows, cols = targets[name]
            out[name][g] = p[0, rows, cols].sum() / mass if mass else np.nan
        out["decay_length"][g] = _mean_over_live(decay_lengths(p), live)[0]
    return out


def effective_measures(effective) -> pd.DataFrame:
    """One row per head or channel group of an `mha_viz.effective.EffectiveAttention`'s layers, in the model's
    layer order: layer (the model's number), kind (its label), group (a head, or a channel group where the
    layer's matrix is per channel and aggregated), and EFFECTIVE_MEASURES."""
    ids = token_keys(effective.token_ids, effective.tokens)
    frames = []
    for la in sorted(effective.layers, key=lambda la: la.layer):
        matrix = la.matrix if la.aggregated is None else la.aggregated
        values = group_measures(matrix, ids)
        frames.append(pd.DataFrame({"layer": la.layer, "kind": la.label, "group": np.arange(matrix.shape[0]),
                                    **values}))
    columns = ["layer", "kind", "group", *EFFECTIVE_MEASURES]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
