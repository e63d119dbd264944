"""Figures of a comparison: the change grid is `change`, the side-by-side panels are the two
heads and their difference on a scale symmetric around 0, long inputs are downsampled keeping a
single strong change, depth plots have one box trace per run, and user text is escaped."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import AttentionRun
from mha_viz.drawing import style as figure_style
from mha_viz.features.compare import figures as compare_figures


def _random(L, H, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.random((L, H, n, n)) + 0.01
    return (a / a.sum(-1, keepdims=True)).astype(np.float32)


def _run(a, tokens=None, name="array"):
    run = AttentionRun.from_array(a, tokens or [f"t{i}" for i in range(a.shape[-1])], model_name=name)
    return run


def test_change_grid_is_the_change_with_the_models_layer_numbers():
    a, b = _random(2, 3, 5, 0), _random(2, 3, 5, 1)
    run_a, run_b = _run(a, name="<b>m</b>"), _run(b)
    for run in (run_a, run_b):
        run.layer_ids, run.model_layers = [3, 7], 8
    cmp = mha_viz.compare(run_a, run_b)
    fig = compare_figures.change_grid(cmp)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), cmp.change)
    assert list(fig.layout.yaxis.ticktext) == ["3", "7"] or list(fig.layout.yaxis.ticktext) == [3, 7]
    assert "JS divergence of token rows" in fig.layout.title.text
    assert "<b>" not in fig.layout.title.text  # the model names (user input) are in the page's caption
    assert "→" in fig.data[1].text[0]  # hover: pattern class in A → in B


def test_change_grid_refuses_models_of_different_shapes():
    cmp = mha_viz.compare(_run(_random(2, 4, 5, 0)), _run(_random(3, 2, 5, 1)))
    with pytest.raises(ValueError, match="depth"):
        compare_figures.change_grid(cmp)


def test_side_by_side_shows_a_b_and_their_difference_symmetrically():
    tokens = ["the", "<script>", "the", "cat", "sat"]
    a, b = _random(1, 2, 5, 2), _random(1, 2, 5, 3)
    b[0, 1] = np.eye(5)
    cmp = mha_viz.compare(_run(a, tokens, name="<i>a</i>"), _run(b, tokens))
    fig = compare_figures.side_by_side(cmp, 0, 1)
    assert len(fig.data) == 3 and all(t.type == "heatmap" for t in fig.data)
    for trace in fig.data:
        assert np.asarray(trace.z).shape == (5, 5)
        assert [figure_style.label_text(x) for x in trace.x] == tokens
        assert "<script>" not in "".join(trace.x) and "&lt;script&gt;" in "".join(trace.x)
    np.testing.assert_allclose(np.asarray(fig.data[2].z), b[0, 1] - a[0, 1], atol=1e-7)  # B − A, as the table
    axis = fig.layout.coloraxis2
    assert fig.data[2].coloraxis == "coloraxis2" and axis.cmin == -axis.cmax and axis.cmid == 0
    assert axis.cmax == pytest.approx(np.abs(a[0, 1] - b[0, 1]).max())
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 1.0
    titles = [fig.layout[f"xaxis{i}"].title.text for i in ("", "2", "3")]
    assert "B − A" in titles[2] and "&lt;i&gt;a&lt;/i&gt;" in titles[0]
    assert not any("<i>" in t for t in titles)


def test_side_by_side_of_unmatched_runs_has_two_panels():
    cmp = mha_viz.compare(_run(_random(1, 1, 4, 4)), _run(_random(1, 1, 7, 5), [f"u{i}" for i in range(7)]))
    fig = compare_figures.side_by_side(cmp, 0, 0, rescale=True)
    assert len(fig.data) == 2
    assert [np.asarray(t.z).shape for t in fig.data] == [(4, 4), (7, 7)]
    assert fig.layout.coloraxis.cmax == pytest.approx(max(np.asarray(t.z).max() for t in fig.data))


def test_side_by_side_downsamples_long_inputs_keeping_one_strong_change():
    n = 300
    a = np.full((1, 1, n, n), 1.0 / n, dtype=np.float32)
    b = a.copy()
    b[0, 0, 200] = 0.0
    b[0, 0, 200, 37] = 1.0  # one row changes: B − A is strongly positive at one cell
    cmp = mha_viz.compare(_run(a), _run(b))
    fig = compare_figures.side_by_side(cmp, 0, 0)
    shapes = [np.asarray(t.z).shape for t in fig.data]
    assert all(s[0] <= compare_figures.POOL_ABOVE and s[0] == s[1] for s in shapes)
    diff = np.asarray(fig.data[2].z)
    assert diff.max() == pytest.approx(1.0 - 1.0 / n, abs=1e-6)  # the strong cell survived pooling
    assert fig.layout.coloraxis2.cmin == -fig.layout.coloraxis2.cmax


def test_depth_distributions_one_box_per_run():
    cmp = mha_viz.compare(_run(_random(2, 4, 5, 6), name="<b>x</b>"), _run(_random(3, 2, 5, 7)))
    fig = compare_figures.depth_distributions(cmp, "entropy", bins=4)
    assert [t.type for t in fig.data] == ["box", "box"]
    assert len(fig.data[0].y) == 8 and len(fig.data[1].y) == 6
    assert set(fig.data[1].x) == {"0.00–0.25", "0.50–0.75", "0.75–1.00"}  # depths 0, 0.5, 1
    assert "<b>" not in fig.data[0].name
    with pytest.raises(ValueError, match="unknown metric"):
        compare_figures.depth_distributions(cmp, "nonsense")


def test_depth_bins_put_each_edge_in_its_own_bin():
    """Six layers at depths 0, 0.2, …, 1 in five bins: one a bin, the last two in the last (a
    rounded edge once put depth 0.6 in the bin below)."""
    names = compare_figures.bin_names(5)
    assert compare_figures.depth_bins(np.arange(6) / 5, 5) == [
        names[0], names[1], names[2], names[3], names[4], names[4]]
    assert compare_figures.depth_bins(np.arange(30) / 29, 5).count(names[0]) == 6  # 0 … 5/29 < 0.2


def test_side_by_side_labels_a_minimal_pairs_changed_tokens_where_not_every_label_fits():
    """16 tokens in three panels: every other label fits (`style.tick_step`), and the two that differ between A and
    B (at odd positions, which every-other-from-the-first would skip) are labelled on every panel, A's on A's and the
    difference's axes, B's on B's, with no two labels closer than that step."""
    words_a = "the teacher gave the student a book because she wanted him to read it now .".split()
    words_b = list(words_a)
    words_b[9], words_b[11] = "he", "her"  # she → he (9), him → her (11): odd positions
    a, b = _random(1, 1, 16, 4), _random(1, 1, 16, 5)
    fig = compare_figures.side_by_side(mha_viz.compare(_run(a, words_a), _run(b, words_b)), 0, 0)
    panels = [(fig.layout.xaxis, fig.layout.yaxis, words_a), (fig.layout.xaxis2, fig.layout.yaxis2, words_b),
              (fig.layout.xaxis3, fig.layout.yaxis3, words_a)]
    for x, y, words in panels:
        for axis in (x, y):
            shown = [words.index(v) if v in words else -1 for v in axis.tickvals]
            assert -1 not in shown and axis.tickmode == "array", axis.tickvals
            assert {9, 11} <= set(shown), (words, axis.tickvals)
            step = min(q - p for p, q in zip(shown, shown[1:]))
            assert step >= 2 and len(shown) >= 16 // 2 - 1, shown  # as far apart as fit, as many as fit


def test_marked_ticks_keep_the_marked_labels_and_space_the_rest():
    labels = [f"t{i}" for i in range(10)]
    assert figure_style.marked_ticks(labels, [], 1)["tickvals"] == labels
    assert figure_style.marked_ticks(labels, [5], 3)["tickvals"] == ["t0", "t5", "t9"]  # 3 and 6: too near 5
    assert figure_style.marked_ticks(labels, [1, 2], 2)["tickvals"] == ["t1", "t2", "t4", "t6", "t8"]
