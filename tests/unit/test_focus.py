"""Token focus and query/key subsets on planted runs: rows and columns are the run's, the
summaries match hand computations, the words level sums pieces, subset heatmaps show exactly
the chosen queries and keys under their own tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha_viz import AttentionRun
from mha_viz.drawing import focus as focus_figures
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import style as figure_style
from mha_viz.views import detail, focus
from tests.helpers import decode_json


def _run(layers=2, heads=3, n=6, tokens=None, word_ids=None, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random((layers, heads, n, n)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    run = AttentionRun.from_array(a, tokens or [f"t{i}" for i in range(n)])
    if word_ids is not None:
        run.word_ids = list(word_ids)
    return run


def test_focus_rows_and_columns_are_the_runs():
    run = _run()
    for i in range(run.n):
        f = focus.focus(run, i)
        assert f.attends_to.shape == f.attended_by.shape == (2, 3, run.n)
        for layer in range(2):
            for h in range(3):
                np.testing.assert_array_equal(f.attends_to[layer, h], run.head(layer, h)[i])
                np.testing.assert_array_equal(f.attended_by[layer, h], run.head(layer, h)[:, i])
    with pytest.raises(IndexError):
        focus.attends_to(run.attentions, run.n)


def test_summaries_by_hand():
    v = np.zeros((2, 3, 4), dtype=np.float32)
    v[0, 0] = [0.1, 0.2, 0.3, 0.4]
    v[0, 1] = [0.7, 0.1, 0.1, 0.1]
    v[1, 2] = [0.0, 0.9, 0.05, 0.05]
    s = focus.summarize(v)
    np.testing.assert_allclose(s.mean_over_heads[0], (v[0, 0] + v[0, 1]) / 3, rtol=1e-6)
    np.testing.assert_allclose(s.max_over_heads[0], [0.7, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(s.mean_over_layers[2], v[1, 2] / 2, rtol=1e-6)
    np.testing.assert_allclose(s.max_over_layers[0], v[0, 0])
    assert (s.top_layer, s.top_head, s.top_position) == (1, 2, 1) and s.top_weight == pytest.approx(0.9)
    # leaving position 1 out (the token itself), the strongest is head (0, 1) on position 0
    s = focus.summarize(v, exclude=1)
    assert (s.top_layer, s.top_head, s.top_position) == (0, 1, 0) and s.top_weight == pytest.approx(0.7)
    assert s.head_max[1, 2] == pytest.approx(0.05) and s.head_max.shape == (2, 3)


def test_one_token_summaries_keep_the_token():
    run = _run(n=1)
    f = focus.focus(run, 0)
    s = focus.summarize(f.attends_to, exclude=0)  # nothing else to rank: the token stays
    assert s.top_position == 0 and s.top_weight == pytest.approx(1.0)


def test_words_level_is_the_word_level_matrix_row_and_column():
    tokens = ["[CLS]", "play", "ing", "ball", "s", "[SEP]"]
    word_ids = [0, 1, 1, 2, 2, 3]
    run = _run(tokens=tokens, word_ids=word_ids)
    for w in range(4):
        f = focus.focus(run, w, words=True)
        assert f.labels == ["[CLS]", "playing", "balls", "[SEP]"]
        for layer in range(2):
            for h in range(3):
                wl = detail.word_level(run.head(layer, h), word_ids)
                np.testing.assert_allclose(f.attends_to[layer, h], wl[w], rtol=1e-5)
                np.testing.assert_allclose(f.attended_by[layer, h], wl[:, w], rtol=1e-5)
        np.testing.assert_allclose(f.attends_to.sum(-1), 1.0, atol=1e-5)  # rows of word_level sum to 1
    # by hand: what "playing" (rows 1, 2) puts on "balls" (cols 3, 4): mean of the summed pieces
    a = run.head(1, 2)
    f = focus.focus(run, 1, words=True)
    assert f.attends_to[1, 2, 2] == pytest.approx(((a[1, 3] + a[1, 4]) + (a[2, 3] + a[2, 4])) / 2, rel=1e-5)


def test_focus_figures_show_every_head_and_the_tokens():
    run = _run(tokens=["a", "<b>", "a", "c", "d", "e"])
    f = focus.focus(run, 2)
    for direction in focus.DIRECTIONS:
        fig = focus_figures.focus_grid(f, direction, run.layer_ids)
        z = np.array(fig.data[0].z)
        assert z.shape == (6, 6)
        np.testing.assert_allclose(z, f.values(direction).reshape(6, 6))
        assert [figure_style.label_text(x) for x in fig.data[0].x] == run.tokens
        assert list(fig.data[0].y) == ["L0 H0", "L0 H1", "L0 H2", "L1 H0", "L1 H1", "L1 H2"]
        s = focus.summarize(f.values(direction), exclude=2)
        json.dumps(decode_json(focus_figures.focus_summary(f, direction, s, run.layer_ids).to_json()))
        focus_figures.head_max_map(s, run.layer_ids, direction).to_json()


def test_focus_grid_lines_part_the_layers_and_frame_the_token():
    run = _run(layers=4, heads=3, n=7)
    fig = focus_figures.focus_grid(focus.focus(run, 5), focus.BY, run.layer_ids)
    *lines, frame = fig.layout.shapes
    assert [(s.type, s.y0, s.y1, s.x0, s.x1) for s in lines] == [
        ("line", y, y, -0.5, 6.5) for y in (2.5, 5.5, 8.5)]
    assert (frame.type, frame.x0, frame.x1, frame.y0, frame.y1) == ("rect", 4.5, 5.5, -0.5, 11.5)
    assert np.asarray(fig.data[0].z).dtype == np.float32  # half the bytes of float64 to the browser


def test_focus_summary_panels_are_the_runs_means_and_maxima():
    """Four heatmaps on their own axes, each the run's row of token 4 averaged or maximised
    over heads (a row per layer) or over layers (a row per head), titled and labelled."""
    tokens = ["a", "<b>", "a", "c", "d", "e", "f"]
    run = _run(layers=2, heads=3, n=7, tokens=tokens)
    run.layer_ids = [3, 7]  # some layers captured: rows name the model's layers
    f = focus.focus(run, 4)
    rows = run.attentions[:, :, 4, :].astype(np.float64)  # (layers, heads, n), straight from the run
    fig = focus_figures.focus_summary(f, focus.TO, focus.summarize(f.attends_to, exclude=4), run.layer_ids)
    expected = {"mean over heads": (rows.mean(1), ["L3", "L7"]),
                "max over heads": (rows.max(1), ["L3", "L7"]),
                "mean over layers": (rows.mean(0), ["H0", "H1", "H2"]),
                "max over layers": (rows.max(0), ["H0", "H1", "H2"])}
    titles = [a.text for a in fig.layout.annotations]
    assert titles == list(expected)
    domains = set()
    for trace, (z, ys), note in zip(fig.data, expected.values(), fig.layout.annotations):
        np.testing.assert_allclose(np.asarray(trace.z), z, rtol=1e-6)
        assert list(trace.y) == ys and [figure_style.label_text(x) for x in trace.x] == tokens
        xaxis, yaxis = fig.layout["xaxis" + trace.xaxis[1:]], fig.layout["yaxis" + trace.yaxis[1:]]
        assert xaxis.anchor == trace.yaxis and yaxis.anchor == trace.xaxis and yaxis.autorange == "reversed"
        # each title over its own panel
        assert xaxis.domain[0] <= note.x <= xaxis.domain[1] and note.y == yaxis.domain[1]
        domains.add((tuple(xaxis.domain), tuple(yaxis.domain)))
    assert len(domains) == 4 and [t.showscale for t in fig.data] == [True, False, False, False]
    (x0, x1), (y0, y1) = fig.layout.xaxis.domain, fig.layout.yaxis.domain
    assert x1 < fig.layout.xaxis2.domain[0] and fig.layout.yaxis3.domain[1] < y0  # panels do not overlap
    # two columns as wide as each other, from one edge of the figure to the other
    assert x0 == 0 and fig.layout.xaxis2.domain[1] == 1
    assert x1 - x0 == pytest.approx(np.diff(fig.layout.xaxis2.domain)[0])
    # rows as tall as their number of rows: 2 layers above, 3 heads below
    assert (y1 - y0) / np.diff(fig.layout.yaxis3.domain)[0] == pytest.approx(2 / 3)
    assert "<b>" not in fig.layout.title.text and "token 4 (d)" in fig.layout.title.text


def test_head_max_map_frames_the_strongest_head():
    run = _run(layers=3, heads=4, n=6)
    a = run.attentions.copy()
    a[2, 1, 0] = [0.0, 0.0, 0.0, 0.99, 0.01, 0.0]  # token 0 puts nearly everything on token 3 in head (2, 1)
    run = AttentionRun.from_array(a, run.tokens)
    s = focus.summarize(focus.focus(run, 0).attends_to, exclude=0)
    fig = focus_figures.head_max_map(s, run.layer_ids, focus.TO)
    others = np.delete(a[:, :, 0, :], 0, axis=-1)  # token 0's row without itself
    np.testing.assert_allclose(np.asarray(fig.data[0].z), others.max(-1), rtol=1e-6)
    [frame] = fig.layout.shapes
    assert (frame.x0, frame.x1, frame.y0, frame.y1) == (0.5, 1.5, 1.5, 2.5)


def test_subset_is_the_chosen_rows_and_columns():
    run = _run(n=10)
    rows, cols = [5, 6, 7, 8, 9], [0, 1, 2]
    np.testing.assert_array_equal(detail.subset(run.head(1, 1), rows, cols), run.head(1, 1)[rows][:, cols])
    with pytest.raises(ValueError):
        detail.subset(run.head(0, 0), [], cols)
    with pytest.raises(IndexError):
        detail.subset(run.head(0, 0), [10], cols)


def test_subset_heatmap_shows_exactly_the_chosen_queries_and_keys():
    tokens = ["[CLS]", "the", "cat", "sat", ".", "the", "dog", "ran", ".", "[SEP]"]
    run = _run(n=10, tokens=tokens)
    rows, cols = [5, 6, 7, 8, 9], [1, 2, 3, 4]
    fig = head_figures.head_heatmap(run, 1, 2, rows=rows, cols=cols)
    np.testing.assert_allclose(np.array(fig.data[0].z), run.head(1, 2)[rows][:, cols])
    assert [figure_style.label_text(y) for y in fig.data[0].y] == tokens[5:10]
    assert [figure_style.label_text(x) for x in fig.data[0].x] == tokens[1:5]
    # the repeated "the" keeps its own label: labels are unique over the whole text
    assert fig.data[0].y[0] != fig.data[0].x[0]


def test_sentence_spans():
    assert detail.sentence_spans(["[CLS]", "the", "cat", ".", "a", "dog", "!", "[SEP]"]) == [(0, 4), (4, 8)]
    assert detail.sentence_spans(["one"]) == [(0, 1)]
    assert detail.sentence_spans(["a", "b", "?", "c"]) == [(0, 3), (3, 4)]
    assert detail.sentence_spans([]) == []


def test_focus_titles_escape_the_token():
    run = _run(tokens=["a", "<b>x</b>", "c"], n=3)
    title = focus_figures.focus_grid(focus.focus(run, 1), focus.TO, run.layer_ids).layout.title.text
    assert "&lt;b&gt;" in title and "<b>" not in title
