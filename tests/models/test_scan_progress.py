"""What a long run's scan shows beyond its statistics: the progress says the time left after
each layer (a fake clock: 2 s a layer), and one query's exact row (`Scan.rows`) at a level of detail
(`scan.row_detail`) covers every key: its bars' sums are the row's, which sums to 1 like the dense run's."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import mha_viz
from mha_viz.budget import time_left
from mha_viz.scan import run as scan_run
from mha_viz.scan.row_detail import row_detail, top_keys
from tests.text_samples import docs_prose

pytestmark = pytest.mark.model


def test_each_layer_done_says_the_time_left(minilm, monkeypatch):
    ticks = iter(np.arange(0.0, 100.0, 2.0))  # every look at the clock is 2 s later: one per layer
    monkeypatch.setattr(scan_run, "TimeLeft", functools.partial(time_left.TimeLeft, clock=lambda: next(ticks)))
    said = []
    mha_viz.scan(minilm, "The cat sat on the mat because it was tired.", progress=lambda f, m: said.append((f, m)))
    layers = [(f, m) for f, m in said if m.startswith("Layer")]
    assert [m.split(" · ")[0] for _, m in layers] == [f"Layer {k} of 6 done" for k in range(1, 7)]
    assert [m.split(" · ")[1] for _, m in layers] == [time_left.ESTIMATING, "about 8 s left", "about 6 s left",
                                                     "about 4 s left", "about 2 s left", time_left.FINISHING]
    assert [f for f, _ in layers] == pytest.approx([k / 6 for k in range(1, 7)])


def test_a_querys_exact_row_covers_every_key_against_the_dense_run(smollm2):
    text = docs_prose(1500)
    scan = mha_viz.scan(smollm2, text)
    row, head, query = 3, 4, scan.n - 7
    dense = mha_viz.analyze(smollm2, text, layers=[scan.layer_ids[row]])
    assert dense.n == scan.n and scan.n > 300
    want = dense.attentions[0, head, query]
    got = scan.rows(row, head, query, query + 1)[0]
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert abs(got.sum(dtype=np.float64) - 1) < 1e-5 and abs(want.sum(dtype=np.float64) - 1) < 1e-5
    detail = row_detail(got, bars=100)  # more keys than bars: each bar the heaviest of its run of keys
    assert detail.keys_per_bar > 1 and detail.starts[0] == 0 and detail.stops[-1] == scan.n
    assert np.array_equal(detail.starts[1:], detail.stops[:-1])  # every key in one bar
    assert abs(detail.mass.sum() - want.sum(dtype=np.float64)) < 1e-5
    for a, b, peak in zip(detail.starts, detail.stops, detail.peak):
        assert abs(peak - want[a:b].max()) < 1e-5
    keys, weights = top_keys(got, 10)
    np.testing.assert_allclose(weights, np.sort(want)[::-1][:10], atol=1e-5)
