"""The measures of a hybrid's other layers (`metrics.effective_measures`, in `metrics/mixing_measures.py`;
docs/head-metrics.md): on planted signed matrices whose values are known by hand (a previous-token layer, an
induction layer on a repeated sequence, an exponential decay whose e-folding length is ⌈−1/ln λ⌉ − 1), and on
random signed matrices against a plain loop over rows written here from the definitions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from mha_viz.metrics.mixing_measures import EFFECTIVE_MEASURES, effective_measures, group_measures


def _loop(matrix: np.ndarray, ids: np.ndarray) -> dict[str, list[float]]:
    """The definitions, row by row: P = |A| / Σ|A| per row, rows with no weight left out."""
    out = {name: [] for name in EFFECTIVE_MEASURES}
    n = matrix.shape[-1]
    for a in matrix:
        dist, decay, live = [], [], 0
        at = dict.fromkeys(("self", "prev", "next", "first", "duplicate_score", "induction_score"), 0.0)
        for t in range(n):
            w = np.abs(a[t]).astype(np.float64)
            if w.sum() == 0:
                continue
            live += 1
            p = w / w.sum()
            dist.append(sum(p[s] * abs(t - s) for s in range(n)))
            d = 0
            while sum(p[s] for s in range(n) if abs(t - s) <= d) < 1 - math.exp(-1) - 1e-9:
                d += 1
            decay.append(d)
            at["self"] += p[t]
            at["prev"] += p[t - 1] if t >= 1 else 0.0
            at["next"] += p[t + 1] if t + 1 < n else 0.0
            at["first"] += p[0]
            at["duplicate_score"] += sum(p[j] for j in range(t) if ids[j] == ids[t])
            at["induction_score"] += sum(p[j + 1] for j in range(t) if ids[j] == ids[t] and j + 1 < n)
        out["distance"].append(np.mean(dist) if live else np.nan)
        out["decay_length"].append(np.mean(decay) if live else np.nan)
        for name, total in at.items():
            out[name].append(total / live if live else np.nan)
        out["prev_token_score"].append(at["prev"] / live if live else np.nan)
    return out


def test_random_signed_matrices_match_the_definitions_row_by_row():
    rng = np.random.default_rng(0)
    n = 23
    a = np.tril(rng.normal(size=(3, n, n)))
    a[1, 5] = 0.0  # a row with no weight: left out
    a[2, :, :3] *= 40  # weight far back: a long decay
    ids = rng.integers(0, 4, size=n)  # many repeats: many induction targets
    got = group_measures(a.astype(np.float32), ids)
    want = _loop(a.astype(np.float32), ids)
    for name in EFFECTIVE_MEASURES:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-9, err_msg=name)


def test_a_previous_token_layer_scores_one_whatever_its_signs():
    n = 12
    a = np.zeros((2, n, n), np.float32)
    a[0, np.arange(1, n), np.arange(n - 1)] = -3.0  # negative weights on the previous token
    a[1, np.arange(1, n), np.arange(n - 1)] = np.where(np.arange(n - 1) % 2, 2.0, -0.5)
    got = group_measures(a, np.arange(n))
    for name, value in (("prev_token_score", 1.0), ("distance", 1.0), ("decay_length", 1.0),
                        ("induction_score", 0.0)):
        np.testing.assert_allclose(got[name], [value, value], err_msg=name)


def test_an_induction_layer_on_a_repeated_sequence_scores_a_half():
    m = 10
    ids = np.tile(np.arange(100, 100 + m), 2)  # a sequence of distinct tokens, twice
    n = 2 * m
    a = np.zeros((1, n, n), np.float32)
    a[0, np.arange(m), np.arange(m)] = 2.0  # the first half: itself (no earlier copy)
    t = np.arange(m, n)
    a[0, t, t - m + 1] = -0.7  # the second half: the token after the earlier copy
    got = group_measures(a, ids)
    assert got["induction_score"][0] == pytest.approx(0.5)  # m of the n rows on their target
    assert got["distance"][0] == pytest.approx((m - 1) / 2)  # 0 for the first half, m − 1 for the second


@pytest.mark.parametrize("lam", [0.5, 0.8, 0.95])
def test_an_exponential_decay_has_its_e_folding_length_on_long_rows(lam):
    n = 400
    gap = np.arange(n)[:, None] - np.arange(n)[None, :]
    a = np.where(gap >= 0, lam ** np.clip(gap, 0, None) * np.where(gap % 2, -1.0, 1.0), 0.0)[None]
    from mha_viz.metrics.mixing_measures import decay_lengths, normalised
    p, _ = normalised(a)
    rows = decay_lengths(p)[0]
    assert np.all(rows[n // 2:] == math.ceil(-1 / math.log(lam)) - 1)  # long rows: the e-folding length
    assert np.all(rows[:n // 2] <= rows[-1])  # shorter rows reach the mass sooner or as soon


def test_a_group_with_no_weight_has_no_measures():
    got = group_measures(np.zeros((1, 5, 5), np.float32), np.arange(5))
    assert all(np.isnan(got[name][0]) for name in EFFECTIVE_MEASURES)


@dataclass
class _Layer:
    layer: int
    label: str
    matrix: np.ndarray
    aggregated: np.ndarray | None = None

    def blocks(self):  # as EffectiveLayer.blocks of a layer held whole: the matrix the views read, one block
        return iter([(0, self.shown)])

    @property
    def shown(self) -> np.ndarray:
        return self.matrix if self.aggregated is None else self.aggregated

    @property
    def shown_groups(self) -> int:
        return self.shown.shape[0]


@dataclass
class _Effective:
    tokens: list[str]
    token_ids: list[int]
    layers: list[_Layer]


def test_the_table_has_a_row_a_group_in_the_models_layer_order_with_the_aggregated_groups():
    rng = np.random.default_rng(1)
    n = 9
    mats = [np.tril(rng.normal(size=(g, n, n))).astype(np.float32) for g in (2, 6, 3)]
    eff = _Effective(tokens=[f"t{i}" for i in range(n)], token_ids=list(range(n)), layers=[
        _Layer(4, "short convolution (banded)", mats[0]),
        _Layer(1, "Mamba-1 (semiseparable)", mats[1], aggregated=mats[2])])
    table = effective_measures(eff)
    assert table["layer"].tolist() == [1, 1, 1, 4, 4]  # layer 1's three aggregated groups, then layer 4's two
    assert table["group"].tolist() == [0, 1, 2, 0, 1]
    assert table["kind"].iloc[0].startswith("Mamba-1")
    want = group_measures(mats[2], np.arange(n))
    np.testing.assert_allclose(table.loc[table.layer == 1, "distance"], want["distance"])


@pytest.mark.parametrize("row_cells", [1, 23 * 2, 23 * 5 + 7])
def test_blocks_of_rows_give_the_measures_of_whole_rows(row_cells):
    """A block of one row, of two, and of five (with a remainder at the end) against every row at once."""
    rng = np.random.default_rng(2)
    n = 23
    a = np.tril(rng.normal(size=(3, n, n))).astype(np.float32)
    a[0, 7] = 0.0  # a row with no weight, inside a block
    a[1, :, :2] *= 30
    ids = rng.integers(0, 3, size=n)
    whole = group_measures(a, ids, row_cells=n * n)
    got = group_measures(a, ids, row_cells=row_cells)
    for name in EFFECTIVE_MEASURES:
        np.testing.assert_allclose(got[name], whole[name], rtol=1e-12, err_msg=name)


def test_the_measures_of_a_long_layer_hold_blocks_of_rows_not_n_by_n_arrays():
    """At 2,048 tokens one n × n float64 array is 32 MiB; in blocks of 64 rows (1 MiB) the measures' temporaries,
    the records' weights included, stay under a quarter of one (whole rows took several at once, and the
    target cells an n × n comparison). numpy's allocations are traced by tracemalloc."""
    import tracemalloc

    n = 2048
    a = np.tril(np.random.default_rng(3).normal(size=(1, n, n))).astype(np.float32)
    tracemalloc.start()
    try:
        group_measures(a, np.arange(n) % 50, row_cells=64 * n)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * n * n / 4, f"{peak / 2**20:.1f} MiB at the peak"
