"""The query/key map's projections on planted vectors (mha_viz.views.qk): PCA keeps a line a line,
AttentionViz's key translation and scaling equalises means and norms without changing any
attention weight, scikit-learn's t-SNE separates planted clusters, the same way every time."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.features.qk import figures as qk_figures
from mha_viz.views import qk
from mha_viz.views.teaching import softmax_rows


def _line(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    origin, direction = rng.normal(size=d), rng.normal(size=d)
    return origin + np.outer(rng.normal(size=n), direction), origin + np.outer(rng.normal(size=n), direction)


def test_pca_of_points_on_a_line_lies_on_a_line():
    q, k = _line(20, 16, 0)
    m = qk.qk_map(q, k)
    pts = np.vstack([m.queries, m.keys])
    assert np.abs(pts[:, 1]).max() < 1e-9 * max(1.0, np.abs(pts[:, 0]).max())
    assert m.explained[0] == pytest.approx(1.0) and m.explained[1] == pytest.approx(0.0, abs=1e-12)
    # distances along the line are kept (PCA of collinear points is an isometry onto the axis)
    x = np.vstack([q, k])
    d_in = np.linalg.norm(x[:, None] - x[None], axis=-1)
    d_out = np.abs(pts[:, 0][:, None] - pts[:, 0][None])
    np.testing.assert_allclose(d_out, d_in, atol=1e-9)


def test_translation_makes_means_equal_and_keeps_every_attention_row():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(12, 8)) * 3 + 5
    k = rng.normal(size=(12, 8)) * 0.5 - 2
    q2, k2 = qk.align_keys(q, k)
    np.testing.assert_allclose(q2.mean(0), k2.mean(0), atol=1e-12)
    # the scaling step (before translation) equalised the mean norms
    alpha = np.sqrt(np.linalg.norm(k, axis=1).mean() / np.linalg.norm(q, axis=1).mean())
    assert np.linalg.norm(q * alpha, axis=1).mean() == pytest.approx(np.linalg.norm(k / alpha, axis=1).mean())
    for causal in (False, True):
        np.testing.assert_allclose(softmax_rows(q2 @ k2.T, causal), softmax_rows(q @ k.T, causal), atol=1e-12)
    m = qk.qk_map(q, k, translate=True)
    assert m.translated
    np.testing.assert_allclose(m.queries.mean(0), m.keys.mean(0), atol=1e-9)  # PCA is linear


def test_tsne_separates_two_planted_clusters():
    rng = np.random.default_rng(2)
    q = rng.normal(size=(15, 10)) * 0.1
    k = rng.normal(size=(15, 10)) * 0.1 + 10
    m = qk.qk_map(q, k, method="tsne")
    assert m.queries.shape == m.keys.shape == (15, 2) and m.explained is None
    gap = np.linalg.norm(m.queries.mean(0) - m.keys.mean(0))
    spread = max(np.linalg.norm(m.queries - m.queries.mean(0), axis=1).max(),
                 np.linalg.norm(m.keys - m.keys.mean(0), axis=1).max())
    assert gap > 2 * spread
    np.testing.assert_array_equal(m.queries, qk.qk_map(q, k, method="tsne").queries)  # deterministic


def test_tiny_and_bad_inputs():
    m = qk.qk_map(np.ones((1, 4)), np.ones((1, 4)), method="tsne")  # one token: one query, one key
    assert m.queries.shape == (1, 2) and np.isfinite(m.keys).all()
    with pytest.raises(ValueError):
        qk.qk_map(np.ones((2, 2)), np.ones((2, 2)), method="umap")
    with pytest.raises(ValueError, match="at most 1024 points"):
        qk.tsne_2d(np.zeros((qk.TSNE_MAX_POINTS + 1, 2)))


def test_map_figure_draws_lines_to_the_strongest_keys():
    q, k = _line(5, 4, 3)
    probs = softmax_rows(q @ k.T, causal=True)
    fig = qk_figures.qk_map_figure(qk.qk_map(q, k), list("abcde"), probs=probs, selected_query=3, top_k=2)
    assert [t.marker.symbol for t in fig.data[:2]] == ["circle", "diamond"]
    lines = [t for t in fig.data if t.mode == "lines"]
    best = qk.strongest_keys(probs[3], 2)
    assert len(lines) == len(best) == 2 and all(b <= 3 for b in best)
    assert qk_figures.picked_query([{"curve_number": 0, "point_index": 4}]) == 4
    assert qk_figures.picked_query([{"curve_number": 1, "point_index": 4}]) is None
