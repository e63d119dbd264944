"""Cross-attention metrics (mha_viz.metrics.cross_attention) on planted rectangular patterns, each value
worked out by hand; the columns it shares with the head table carry the head table's names and values."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import metrics
from mha_viz.capture import CrossAttention
from mha_viz.drawing import cross as cross_figures
from mha_viz.metrics import cross_attention as cross_metrics
from tests.helpers import random_run


def _planted(n_q: int = 4, n_k: int = 7) -> np.ndarray:
    """(1, 4, n_q, n_k): head 0 follows the diagonal path, head 1 is uniform, head 2 looks at the
    first source token, head 3 at the last (a special </s>)."""
    a = np.zeros((1, 4, n_q, n_k))
    path = cross_metrics.diagonal_path(n_q, n_k)
    a[0, 0, np.arange(n_q), path] = 1.0
    a[0, 1] = 1.0 / n_k
    a[0, 2, :, 0] = 1.0
    a[0, 3, :, -1] = 1.0
    return a


def test_the_diagonal_path_runs_corner_to_corner():
    assert cross_metrics.diagonal_path(4, 7).tolist() == [0, 2, 4, 6]
    assert cross_metrics.diagonal_path(1, 5).tolist() == [0]
    assert cross_metrics.diagonal_path(5, 3).tolist() == [0, 0, 1, 2, 2]  # rounded half to even


def test_planted_heads_score_as_worked_out_by_hand():
    n_q, n_k = 4, 7
    special = [False] * (n_k - 1) + [True]
    s = {k: v[0] for k, v in cross_metrics.cross_stats(_planted(n_q, n_k), special).items()}
    np.testing.assert_allclose(s["confidence"], [1, 1 / n_k, 1, 1])
    np.testing.assert_allclose(s["first"], [0.25, 1 / n_k, 1, 0])  # the path starts at the first token
    np.testing.assert_allclose(s["special"], [0.25, 1 / n_k, 0, 1])  # and ends at the last
    np.testing.assert_allclose(s["entropy"][1], np.log(n_k), rtol=1e-9)  # uniform: ln n
    np.testing.assert_allclose(s["norm_entropy"][1], 1.0, rtol=1e-9)
    # one-hot rows, smoothed: -(a ln a + (n-1) b ln b) with a = 0.9999 + 1e-4/n, b = 1e-4/n
    b = 1e-4 / n_k
    one_hot = -((1 - 1e-4 + b) * np.log(1 - 1e-4 + b) + (n_k - 1) * b * np.log(b))
    np.testing.assert_allclose(s["entropy"][[0, 2, 3]], one_hot, rtol=1e-9)
    # alignment: the path head keeps all its mass within ±1; uniform keeps the share of the band
    band = np.mean([len([j for j in range(n_k) if abs(j - p) <= 1]) for p in cross_metrics.diagonal_path(n_q, n_k)])
    np.testing.assert_allclose(s["alignment"], [1, band / n_k, 0.25, 0.25])  # first/last: 1 of 4 rows near


def test_the_table_and_the_figures_of_a_cross_attention():
    a = _planted().astype(np.float32)
    cross = CrossAttention(a, query_tokens=list("wxyz"), key_tokens=list("abcdef") + ["</s>"],
                           key_special=[False] * 6 + [True])
    table = cross_metrics.cross_table(cross)
    assert table[["layer", "head"]].values.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3]]
    assert table["special"].tolist() == pytest.approx([0.25, 1 / 7, 0, 1], rel=1e-6)
    heat = cross_figures.cross_heatmap(cross, 0, 0)
    np.testing.assert_array_equal(np.asarray(heat.data[0].z), a[0, 0])
    assert list(heat.data[0].y) == list("wxyz") and len(heat.data[0].x) == 7
    thumbs = cross_figures.thumbnails(a, thumb=48)
    assert thumbs.shape == (1, 4, 48, 48) and thumbs[0, 2, :, 0].min() == 1.0 and thumbs[0, 2, :, -1].max() == 0.0
    with pytest.raises(ValueError, match="query and"):
        CrossAttention(a, query_tokens=list("wx"), key_tokens=list("abcdefg"))


def test_a_cross_column_named_like_a_head_table_column_is_that_measure():
    """On a square pattern that sees every key (an encoder's), each cross-attention column that bears a name of
    the head table (the catalogue's) has the head table's values; the others are the rectangular measures that
    the head table does not have."""
    run, _ = random_run(L=2, H=3, n=8, tokens=lambda rng, n: [f"w{i}" for i in range(n)])
    table = metrics.head_table(run)
    cross = cross_metrics.cross_stats(run.attentions, run.special_mask, run.tokens)
    shared = [c for c in cross_metrics.COLUMNS if c in metrics.METRICS]
    assert shared == ["entropy", "norm_entropy", "confidence", "first", "sep", "punct"]  # the row table's on keys
    for column in shared:
        np.testing.assert_allclose(cross[column].ravel(), table[column].to_numpy(), rtol=1e-5, err_msg=column)
    assert set(cross_metrics.COLUMNS) - set(shared) == {"special", "alignment"}
    assert not {"special", "alignment"} & set(table.columns)
