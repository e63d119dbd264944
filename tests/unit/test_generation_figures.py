"""Figures of the Generate page on planted arrays: the heads × context heatmap (one row per head,
grouped-query groups labelled and separated), the causal matrix with the step's row framed,
the masses over steps computed by hand, and the alternatives' bars."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.drawing import style as figure_style
from mha_viz.features.generate import figures as gfig


def _causal(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.tril(rng.random((n, n))) + np.eye(n) * 1e-3
    return (a / a.sum(-1, keepdims=True)).astype(np.float32)


def _labels(axis_values) -> list[str]:
    return [figure_style.label_text(x) for x in axis_values]


def test_query_row_is_the_position_that_chose_the_token():
    assert gfig.query_row(num_prompt=4, step=0) == 3  # the last prompt token picks the first new one
    assert gfig.query_row(num_prompt=4, step=2) == 5


def test_heads_context_rows_are_the_heads_in_order():
    H, k = 6, 5
    rows = np.zeros((H, k), dtype=np.float32)
    for h in range(H):
        rows[h, h % k] = 1.0  # head h looks at token h mod k only
    fig = gfig.heads_context(rows, ["a", "b", "a", "x", "y"], num_prompt=3, num_kv_heads=H, title="t")
    trace = fig.data[0]
    np.testing.assert_array_equal(np.asarray(trace.z), rows)
    assert list(trace.y) == [f"H{h}" for h in range(H)]  # plain MHA: no KV groups
    assert _labels(trace.x) == ["a", "b", "a", "x", "y"] and len(set(trace.x)) == k
    assert not [s for s in fig.layout.shapes if s.line.color == "black"]  # no group separators
    assert fig.layout.yaxis.autorange == "reversed"  # head 0 on top


def test_gqa_groups_are_labelled_and_separated_where_the_kv_head_changes():
    H, G = 9, 3  # smollm2: 9 query heads share 3 key/value heads
    fig = gfig.heads_context(np.full((H, 4), 0.25), list("abcd"), num_prompt=4, num_kv_heads=G, title="t")
    assert list(fig.data[0].y) == [f"H{h} (KV {h // 3})" for h in range(H)]
    separators = sorted(s.y0 for s in fig.layout.shapes if s.line.color == "black")
    assert separators == [2.5, 5.5]  # between H2|H3 and H5|H6
    assert all(s.y0 == s.y1 for s in fig.layout.shapes if s.line.color == "black")  # horizontal lines
    assert gfig.group_boundaries(8, 2) == [3.5] and gfig.group_boundaries(4, 4) == []


def test_generated_tokens_are_marked_on_the_axis():
    tokens = ["<b>", "k", "d", "x", "b"]
    fig = gfig.heads_context(np.full((2, 5), 0.2), tokens, num_prompt=3, num_kv_heads=2, title="t")
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks[:3] == figure_style.axis_labels(tokens)[:3]  # prompt tokens as they are (escaped)
    assert "&lt;b&gt;" in ticks[0]
    assert all(gfig.GENERATED_COLOUR in t for t in ticks[3:])  # generated ones coloured
    assert list(fig.layout.xaxis.tickvals) == list(fig.data[0].x)
    custom = np.asarray(fig.data[0].customdata)
    assert list(custom[0]) == ["prompt"] * 3 + ["generated"] * 2  # hover says which
    boundary = [s for s in fig.layout.shapes if s.line.color == gfig.GENERATED_COLOUR]
    assert len(boundary) == 1 and boundary[0].x0 == boundary[0].x1 == 2.5


def test_causal_matrix_frames_the_row_of_the_step():
    n, P = 7, 4
    a = _causal(n)
    step = 2
    row = gfig.query_row(P, step)
    fig = gfig.causal_matrix(a, [f"t{i}" for i in range(n)], P, row, title="m")
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), a)
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rects) == 1
    r = rects[0]
    assert (r.y0, r.y1) == (row - 0.5, row + 0.5) and (r.x0, r.x1) == (-0.5, n - 0.5)
    assert fig.layout.yaxis.autorange == "reversed"
    ticks_y = list(fig.layout.yaxis.ticktext)
    assert gfig.GENERATED_COLOUR not in ticks_y[P - 1] and gfig.GENERATED_COLOUR in ticks_y[P]


def test_causal_matrix_of_a_long_sequence_is_a_window_around_the_row():
    n, P, row = 400, 300, 350
    fig = gfig.causal_matrix(_causal(n), [f"t{i}" for i in range(n)], P, row, title="m", max_tokens=100)
    start, stop = gfig.matrix_window(n, row, 100)
    assert (start, stop) == (300, 400)
    assert np.asarray(fig.data[0].z).shape == (100, 100)
    assert _labels(fig.data[0].x)[0] == "t300"
    rect = next(s for s in fig.layout.shapes if s.type == "rect")
    assert rect.y0 == row - start - 0.5
    assert "tokens 300–399 of 400" in fig.layout.title.text
    assert gfig.matrix_window(50, 10, 100) == (0, 50)
    assert gfig.matrix_window(1000, 5, 100) == (0, 100)


def test_step_masses_by_hand():
    # 3 prompt tokens, 3 steps; rows 2, 3, 4 chose the tokens of steps 0, 1, 2
    a = np.zeros((6, 6))
    a[0, 0] = 1
    a[1, :2] = [0.5, 0.5]
    a[2, :3] = [0.2, 0.3, 0.5]            # step 0: all on the prompt, 0.2 on the first token
    a[3, :4] = [0.1, 0.1, 0.2, 0.6]       # step 1: 0.4 prompt, 0.6 on the first generated token
    a[4, :5] = [0.5, 0.0, 0.0, 0.25, 0.25]  # step 2: 0.5 prompt (all on the sink), 0.5 generated
    a[5, :6] = 1 / 6                      # the last token's row chose nothing
    m = gfig.step_masses(a, num_prompt=3, num_steps=3)
    np.testing.assert_allclose(m["prompt"], [1.0, 0.4, 0.5])
    np.testing.assert_allclose(m["generated"], [0.0, 0.6, 0.5])
    np.testing.assert_allclose(m["first"], [0.2, 0.1, 0.5])
    np.testing.assert_allclose(m["prompt"] + m["generated"], 1.0)


def test_mass_lines_draw_the_masses_and_mark_the_step():
    m = {"prompt": np.array([1.0, 0.4]), "generated": np.array([0.0, 0.6]), "first": np.array([0.2, 0.1])}
    fig = gfig.mass_lines(m, title="h", current=1)
    assert [list(tr.y) for tr in fig.data] == [[1.0, 0.4], [0.0, 0.6], [0.2, 0.1]]
    assert all(list(tr.x) == [1, 2] for tr in fig.data)  # steps counted from 1
    assert any(s.x0 == 2 and s.x1 == 2 for s in fig.layout.shapes)  # the current step (0-based 1)
    names = ["on the prompt", "on generated tokens", "on the first token (sink)"]
    assert [tr.name for tr in fig.data] == names


@pytest.mark.parametrize("chosen,prob,expected_bars", [("b", 0.3, 3), ("z", 0.01, 4)])
def test_choice_bars_colour_the_chosen_token(chosen, prob, expected_bars):
    top = [("a", 0.6), ("b", 0.3), ("<c>", 0.05)]
    fig = gfig.choice_bars(top, chosen, prob, title="s")
    bar = fig.data[0]
    assert bar.orientation == "h" and len(bar.x) == expected_bars
    names = _labels(bar.y)
    assert names[:3] == ["a", "b", "<c>"]  # best on top (reversed axis), escaped labels
    assert "<c>" not in "".join(bar.y)
    colours = list(bar.marker.color)
    assert colours[names.index(chosen)] == gfig.CHOSEN_COLOUR
    assert colours.count(gfig.CHOSEN_COLOUR) == 1
    assert list(bar.x)[names.index(chosen)] == pytest.approx(prob)
    assert fig.layout.yaxis.autorange == "reversed"
