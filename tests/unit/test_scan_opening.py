"""Where a view of a scan opens (`mha_viz.scan.opening`: the Head view's *Links* section) and one row at a
level of detail (`mha_viz.scan.row_detail`), on planted data: a head whose last query keeps no key (a long
text spreads a broad head thin) opens on a query that keeps one, the head opened on is the one whose kept
links past the first token weigh most, and bars of neighbouring keys keep each run's heaviest key and the
row's sum."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mha_viz.scan.opening import kept_counts, opening_query
from mha_viz.scan.result import Scan
from mha_viz.scan.row_detail import row_detail, top_keys


def _scan(n: int = 12, layers: int = 2, heads: int = 3, top_k: int = 4) -> Scan:
    keys = np.full((layers, heads, n, top_k), -1, np.int32)
    weights = np.zeros((layers, heads, n, top_k), np.float32)
    return Scan(tokens=[f"t{i}" for i in range(n)], token_ids=list(range(n)), special_mask=[False] * n,
                model_name="planted", layer_ids=list(range(layers)), is_causal=True, table=pd.DataFrame(),
                pooled=np.zeros((layers, heads, 2, 2), np.float32), keys=keys, weights=weights,
                rest_mass=np.ones((layers, heads, n), np.float32), top_k=top_k, min_weight=0.005)


def test_a_head_whose_last_query_keeps_nothing_opens_on_one_that_keeps_keys():
    scan = _scan()
    scan.keys[0, 0, 0, 0], scan.weights[0, 0, 0, 0] = 0, 1.0  # query 0 on itself, the first token
    scan.keys[0, 0, 6, :2], scan.weights[0, 0, 6, :2] = (5, 0), (0.4, 0.3)
    scan.keys[0, 0, 9, 0], scan.weights[0, 0, 9, 0] = 0, 0.9  # on the first token only
    assert kept_counts(scan, 0, 0)[-1] == 0  # the last query: "keeps 0 keys"
    query = opening_query(scan, 0, 0)
    assert query == 6 and kept_counts(scan, 0, 0)[query] == 2  # the last past the first token
    scan.keys[0, 0, 6] = -1
    assert opening_query(scan, 0, 0) == 9  # else the last that keeps any key
    scan.keys[0, 0] = -1
    assert opening_query(scan, 0, 0) == scan.n - 1  # nothing kept anywhere: the last query


@pytest.mark.parametrize("start,stop,bars", [(0, 1000, 7), (0, 1000, 1000), (0, 1000, 5000), (13, 977, 600),
                                             (999, 1000, 3)])
def test_bars_keep_every_key_once_the_heaviest_of_each_run_and_the_sum(start, stop, bars):
    row = np.random.default_rng(stop + bars).random(1000).astype(np.float32) ** 8
    row[517] = 3.0  # one sharp link among many keys: never averaged away
    d = row_detail(row, start, stop, bars)
    assert d.starts[0] == start and d.stops[-1] == stop and np.array_equal(d.starts[1:], d.stops[:-1])
    assert len(d.starts) == min(bars, stop - start) and (d.stops > d.starts).all()
    assert d.keys_per_bar == max(d.stops - d.starts) <= -(-(stop - start) // min(bars, stop - start))
    for a, b, peak, at, mass in zip(d.starts, d.stops, d.peak, d.peak_key, d.mass):
        assert peak == row[a:b].max() and row[at] == peak and a <= at < b
        assert mass == pytest.approx(row[a:b].sum(dtype=np.float64))
    assert d.mass.sum() == pytest.approx(row[start:stop].sum(dtype=np.float64))
    if start <= 517 < stop:
        assert 3.0 in d.peak


def test_a_range_outside_the_row_is_refused_and_top_keys_are_exact():
    row = np.array([0.1, 0.5, 0.1, 0.3], np.float32)
    with pytest.raises(ValueError):
        row_detail(row, 2, 2)
    with pytest.raises(ValueError):
        row_detail(row, 0, 5)
    keys, weights = top_keys(row, 3)
    assert keys.tolist() == [1, 3, 0] and weights.tolist() == pytest.approx([0.5, 0.3, 0.1])
