"""Every head on two measures (`figures.head_scatter`, `drawing/scatter`): each point is its row's values, the
colours are the layers, classes or the third measure of that row, the hover names the head, and the points a
click, box or lasso picks read back as the table's rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mha_viz import AttentionRun, figures, metrics
from mha_viz.drawing import scatter
from mha_viz.drawing.style import PATTERN_COLOURS
from mha_viz.metrics.measures import ENTROPY_SMOOTHING


def _table() -> pd.DataFrame:
    """Three layers (the model's 2, 5 and 7: a run of some layers) × 2 heads, with planted values."""
    layers = [2, 2, 5, 5, 7, 7]
    return pd.DataFrame({
        "layer": layers, "head": [0, 1] * 3,
        "entropy": [0.5, 1.5, 2.5, np.nan, 4.5, 5.5],
        "prev_token_score": [0.9, 0.1, 0.8, 0.2, 0.7, 0.3],
        "induction_score": [0.0, 0.25, 0.5, 0.75, 1.0, 0.125],
        "pattern": ["diagonal:prev", "broad", "vertical", "sink", "mixed:prev+self", "broad"],
    })


def test_each_point_is_its_rows_values_and_names_its_head():
    table = _table()
    fig = scatter.measure_scatter(table, "entropy", "prev_token_score", "induction_score")
    data = fig.data[0]
    np.testing.assert_array_equal(np.asarray(data.x, dtype=float), table["entropy"].to_numpy())  # NaN kept in place
    np.testing.assert_array_equal(np.asarray(data.y, dtype=float), table["prev_token_score"].to_numpy())
    np.testing.assert_array_equal(np.asarray(data.marker.color, dtype=float), table["induction_score"].to_numpy())
    assert data.text[2].startswith("layer 5, head 0") and "0.8" in data.text[2] and "0.5" in data.text[2]
    assert data.text[5].startswith("layer 7, head 1")
    assert fig.layout.xaxis.title.text == metrics.METRICS["entropy"].label
    assert fig.layout.yaxis.title.text == metrics.METRICS["prev_token_score"].label


def test_colour_by_layer_uses_the_models_numbers_and_by_pattern_its_class():
    table = _table()
    by_layer = scatter.measure_scatter(table, "entropy", "prev_token_score", scatter.LAYER)
    assert list(by_layer.data[0].marker.color) == [2, 2, 5, 5, 7, 7]
    by_class = scatter.measure_scatter(table, "entropy", "prev_token_score", scatter.PATTERN)
    want = [PATTERN_COLOURS[p.split(":")[0]] for p in table["pattern"]]
    assert list(by_class.data[0].marker.color) == want
    legend = {t.name for t in by_class.data[1:]}
    assert legend == {"diagonal", "broad", "vertical", "sink", "mixed"}  # the classes present, no others
    assert "mixed:prev+self" in by_class.data[0].text[4]


def test_columns_it_does_not_hold_are_refused():
    table = _table()
    with pytest.raises(ValueError, match="confidence"):
        scatter.measure_scatter(table, "confidence", "entropy")
    with pytest.raises(ValueError, match="layer"):
        scatter.measure_scatter(table, "entropy", "prev_token_score", "no such colour")
    assert scatter.measures_of(table) == ["entropy", "prev_token_score", "induction_score"]  # the catalogue's order


def test_picked_points_read_back_as_rows_once_each_and_skip_the_legend():
    points = [{"curve_number": 0, "point_index": 4}, {"curve_number": 0, "point_index": 1},
              {"curve_number": 2, "point_index": 0},  # a legend entry
              {"curve_number": 0, "pointIndex": 4}, {"curve_number": 0, "point_number": 3}]
    assert scatter.picked_heads(points) == [4, 1, 3]
    assert scatter.picked_heads([]) == [] and scatter.picked_heads(None) == []


def test_a_runs_figure_is_its_head_table():
    rng = np.random.default_rng(3)
    a = rng.random((2, 3, 7, 7)).astype(np.float32)
    run = AttentionRun(tokens=[f"t{i}" for i in range(7)], attentions=a / a.sum(-1, keepdims=True))
    fig = figures.head_scatter(run, "entropy", "first", "pattern")
    assert len(fig.data[0].x) == 2 * 3
    p = run.attentions.astype(np.float64)
    smooth = (1 - ENTROPY_SMOOTHING) * p + ENTROPY_SMOOTHING / 7  # every row sees 7 keys
    by_hand_entropy = (-(smooth * np.log(smooth)).sum(-1)).mean(-1).reshape(-1)  # mean_i H(Â_i), layer-major
    by_hand_first = p[:, :, :, 0].mean(-1).reshape(-1)  # mean_i A_i,0
    np.testing.assert_allclose(np.asarray(fig.data[0].x, dtype=float), by_hand_entropy, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fig.data[0].y, dtype=float), by_hand_first, atol=1e-6)
    assert fig.data[0].text[4].startswith("layer 1, head 1")
