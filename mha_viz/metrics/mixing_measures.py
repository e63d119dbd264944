"""The measures of a hybrid's other token-mixing layers (issue 55): a head or channel group's exact effective
attention A (`mha_viz.effective`) is signed and its rows do not sum to 1, so the softmax heads' measures do not
apply as they are. These read where a row's weight lies, whatever its sign: each row is |A| normalised to sum to
1, P[t, s] = |A[t, s]| / Σ_s' |A[t, s']| (a row with no weight at all is left out), and

- the row table's measures (`row_table`: distance, self, previous and next token, first token, the detectors' shares
  Σ(P ⊙ T) / ΣP), each on P as on the softmax heads' rows (a record of marked keys, which reads the text's tokens,
  is left out): every live row of P sums to 1, so a share is the mean over the live rows too;
- `decay_length`: mean_t of the fewest keys back d such that the keys within d of t hold at least 1 − 1/e of
  row t's weight: for weights decaying as λ^(t − s) it is ⌈−1/ln λ⌉ − 1 on long rows, the e-folding length.

docs/head-metrics.md defines them; `effective_measures` gives every group's, in the model's layer order."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_viz.metrics.row_measures import token_keys
from mha_viz.metrics.row_table import TABLE, RowTable, current, weights
from mha_viz_models.effective.layer import feed


def effective_names(table: RowTable | None = None) -> tuple[str, ...]:
    """The measures of the effective table: the row table's records but those of marked keys, then decay_length."""
    return (*(r.name for r in (table or current()) if r.kind != "keys"), "decay_length")


EFFECTIVE_MEASURES = effective_names(TABLE)
MEASURE_COLUMNS = ["layer", "kind", "group", *EFFECTIVE_MEASURES]  # `effective_measures`' table (the default's)
DECAY_MASS = 1 - np.exp(-1.0)  # the share of a row's weight within its decay length


ROW_CELLS = 1 << 21  # cells of one block of rows (`group_measures`): 16 MiB of float64 a temporary


def normalised(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P, live): (..., rows, n) |A| with each row summed to 1, and (..., rows) which rows hold any weight (the
    others are 0 in P and left out of every measure)."""
    weight = np.abs(np.asarray(matrix, dtype=np.float64))
    total = weight.sum(axis=-1)
    live = total > 0
    return weight / np.where(live, total, 1.0)[..., None], live


def decay_lengths(p: np.ndarray, first: int = 0) -> np.ndarray:
    """(..., rows): each row's fewest keys back d whose weight (keys t − d … t, and any past t within d) reaches
    DECAY_MASS of the row's; P as `normalised` gives it, its rows the queries first, first + 1, … of n keys."""
    rows, n = p.shape[-2:]
    t = np.arange(first, first + rows)[:, None]
    d = np.arange(n)[None, :]
    index = np.broadcast_to(np.clip(t - d, 0, None), p.shape)
    within = np.take_along_axis(p, index, axis=-1) * (d <= t)  # the key d back
    index = np.broadcast_to(np.clip(t + d, None, n - 1), p.shape)
    within += np.take_along_axis(p, index, axis=-1) * ((t + d <= n - 1) & (d > 0))  # and the key d ahead
    np.cumsum(within, axis=-1, out=within)  # weight within d of t
    return np.argmax(within >= DECAY_MASS - 1e-9, axis=-1).astype(np.float64)


class MeasureSums:
    """EFFECTIVE_MEASURES of one layer's groups, added up from blocks of rows in any order (`add`) and read at the
    end (`finish`): every measure is a mean over rows. Each block is read one group and about `row_cells` cells at
    a time: the temporaries are a few such pieces, never an n × n array (at 8,192 tokens, 16 MiB each, where whole
    rows took 512 MiB)."""

    def __init__(self, groups: int, ids: np.ndarray, *, row_cells: int = ROW_CELLS):
        self.n, self.ids = len(ids), np.asarray(ids)
        self.records = [r for r in current() if r.kind != "keys"]
        self.step = max(1, row_cells // max(self.n, 1))
        self.sums = {name: np.zeros(groups) for name in effective_names()}
        self.live_rows = np.zeros(groups)

    def add(self, first: int, rows: np.ndarray) -> None:
        """Rows first, first + 1, … of every group: (G, rows, n) signed."""
        for t0 in range(first, first + rows.shape[1], self.step):
            t1 = min(first + rows.shape[1], t0 + self.step)
            self._add(t0, rows[:, t0 - first:t1 - first])

    def _add(self, t0: int, rows: np.ndarray) -> None:
        w = {r.name: weights(r, t0, rows.shape[1], self.ids) for r in self.records}  # each group's rows read them
        for g in range(rows.shape[0]):
            p, live = normalised(rows[g])
            self.live_rows[g] += live.sum()
            self.sums["decay_length"][g] += (decay_lengths(p, t0) * live).sum()
            for name, weight in w.items():  # a dead row's P is 0: it adds nothing
                self.sums[name][g] += p[weight].sum() if weight.dtype == bool else (p * weight).sum()

    def finish(self) -> dict[str, np.ndarray]:
        """{measure: (G,) float64}, NaN for a group with no weight."""
        live = self.live_rows
        with np.errstate(invalid="ignore", divide="ignore"):
            return {name: np.where(live > 0, total / live, np.nan) for name, total in self.sums.items()}


def group_measures(matrix: np.ndarray, ids: np.ndarray, *, row_cells: int = ROW_CELLS) -> dict[str, np.ndarray]:
    """Every measure of the effective table (`effective_names`) for each group of one layer: (G, n, n) signed matrix,
    the tokens' ids (`row_measures.token_keys`) -> {measure: (G,) float64}, NaN for a group with no weight
    (`MeasureSums`)."""
    sums = MeasureSums(matrix.shape[0], ids, row_cells=row_cells)
    sums.add(0, matrix)
    return sums.finish()


def measures_frame(layer: int, label: str, values: dict[str, np.ndarray]) -> pd.DataFrame:
    """One layer's rows of `effective_measures`' table from its groups' measures."""
    groups = len(next(iter(values.values())))
    return pd.DataFrame({"layer": layer, "kind": label, "group": np.arange(groups), **values})


def effective_measures(effective) -> pd.DataFrame:
    """One row per head or channel group of an `mha_viz.effective.EffectiveAttention`'s layers, in the model's
    layer order: layer (the model's number), kind (its label), group (a head, or a channel group where the
    layer's matrix is per channel and aggregated), and EFFECTIVE_MEASURES."""
    ids = token_keys(effective.token_ids, effective.tokens)
    frames, columns = [], ["layer", "kind", "group", *effective_names()]
    for la in sorted(effective.layers, key=lambda la: la.layer):
        sums = MeasureSums(la.shown_groups, ids)  # the aggregated channel groups where the layer is per channel
        feed(la, sums)
        frames.append(measures_frame(la.layer, la.label, sums.finish()))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
