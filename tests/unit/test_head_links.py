"""The scan's rule for a row's kept keys (`views.head_links.kept_keys`) on rows worked by hand, and one head's
links of a planted dense run (`links`) against it."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import AttentionRun
from mha_viz.features.head_view import links_figures as link_figures
from mha_viz.views import head_links


def test_the_heaviest_keys_above_the_floor_heaviest_first_the_lower_key_on_a_tie():
    rows = np.array([[0.2, 0.5, 0.004, 0.2, 0.096],
                     [0.2, 0.2, 0.2, 0.2, 0.2],
                     [0.001, 0.001, 0.001, 0.001, 0.996]], np.float32)
    keys, weights = head_links.kept_keys(rows, top_k=3, min_weight=0.005)
    np.testing.assert_array_equal(keys, [[1, 0, 3], [0, 1, 2], [4, -1, -1]])
    np.testing.assert_allclose(weights, [[0.5, 0.2, 0.2], [0.2, 0.2, 0.2], [0.996, 0, 0]])
    keys, weights = head_links.kept_keys(rows[:1], top_k=8, min_weight=0.005)  # more slots than keys
    np.testing.assert_array_equal(keys, [[1, 0, 3, 4, -1, -1, -1, -1]])
    np.testing.assert_allclose(weights.sum(), 0.996, atol=1e-6)


def planted_run() -> AttentionRun:
    """Two heads over 6 tokens: head 0 looks at the previous token (0.9) and the first (0.1); head 1 is flat."""
    n = 6
    a = np.zeros((1, 2, n, n), np.float32)
    for i in range(n):
        a[0, 0, i, max(i - 1, 0)] += 0.9
        a[0, 0, i, 0] += 0.1
        a[0, 1, i, :i + 1] = 1.0 / (i + 1)
    return AttentionRun.from_array(a, [f"t{i}" for i in range(n)], is_causal=True)


def test_a_dense_runs_links_by_hand():
    run = planted_run()
    links = head_links.links(run, 0, 0)
    assert links.n == 6 and links.top_k == head_links.TOP_K and links.min_weight == head_links.MIN_WEIGHT
    np.testing.assert_array_equal(links.keys[:, :2], [[0, -1], [0, -1], [1, 0], [2, 0], [3, 0], [4, 0]])
    np.testing.assert_allclose(links.weights[:, :2], [[1, 0], [1, 0], [0.9, 0.1], [0.9, 0.1], [0.9, 0.1], [0.9, 0.1]],
                               atol=1e-6)
    np.testing.assert_allclose(links.rest, 0, atol=1e-6)
    assert (links.keys[:, 2:] == -1).all()
    assert head_links.links(links, 0, 0) is links
    with pytest.raises(IndexError):
        head_links.links(links, 0, 1)
    flat = head_links.links(run, 0, 1)
    np.testing.assert_allclose(flat.weights.sum(-1) + flat.rest, 1, atol=1e-6)
    assert (flat.keys[5, :6] == np.arange(6)).all()  # six equal keys: in order


def test_the_figures_read_a_runs_links():
    run = planted_run()
    table = link_figures.heaviest_links(run, 0, 0, count=3)
    assert table["weight"].tolist() == pytest.approx([1, 1, 0.9]) and table["query"].tolist() == [0, 1, 2]
    assert link_figures.heaviest_links(run, 0, 0, skip_first=True)["key"].tolist() == [1, 2, 3, 4]
    assert link_figures.query_links(run, 0, 0, 3)["key"].tolist() == [2, 0]
    strip = link_figures.token_strip(run, 0, 0, 0)
    np.testing.assert_allclose(strip.data[0].y, [1, 1, 0.9, 0.9, 0.9, 0.9], atol=1e-6)
    hist = link_figures.distance_histogram(run, 0, 0)
    assert float(np.sum(hist.data[0].y)) == pytest.approx(1.0, abs=1e-6)  # every row's kept mass, over n rows


def test_the_strip_and_histogram_keep_their_plot_under_long_titles_and_labels():
    """A fixed height under a title of three lines and turned labels left the strip's plot 59 px of 360 (a
    29-token sentence): each figure is now as tall as its plot area (`PLOT_PX`) and the margins that `margins.fit`
    gives it. The histogram's log axis writes its ticks whole (Plotly's own read "… 9 10 2" for 20)."""
    from mha_viz.drawing import margins

    words = ["grandmother", "fisherman", "carrying", "humming"] * 8
    a = np.full((1, 1, len(words), len(words)), 1 / len(words), np.float32)
    run = AttentionRun(tokens=words, attentions=a)
    for fig in (link_figures.token_strip(run, 0, 0, 0), link_figures.distance_histogram(run, 0, 0)):
        margins.fit(fig)
        assert fig.layout.height - fig.layout.margin.t - fig.layout.margin.b == link_figures.PLOT_PX
    axis = link_figures.distance_histogram(run, 0, 0).layout.xaxis
    assert list(axis.tickvals) == [1, 2, 5, 10, 20] and list(axis.ticktext) == ["1", "2", "5", "10", "20"]
    assert link_figures.log_ticks(2048)[1][-2:] == ["1,000", "2,000"]
