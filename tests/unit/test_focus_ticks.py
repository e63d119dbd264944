"""Token focus labels every head and every token where the labels fit (issue 54): each axis of its grid,
summaries and largest-weight map sets its ticks outright (Plotly drops labels it finds too close, and
it dropped every other head of MiniLM's 72), every label where each gets the pixels a 12-px label
needs, else every other one, never fewer while every other one fits."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import AttentionRun
from mha_viz.drawing import focus as focus_figures
from mha_viz.drawing.style import TICK_CHAR_PX, TICK_LINE_PX, TURNED_PX, axis_labels
from mha_viz.views import focus

SENTENCE = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "too",
            "tired", ".", "[SEP]"]


def _run(layers, heads, tokens):
    rng = np.random.default_rng(0)
    a = rng.random((layers, heads, len(tokens), len(tokens))).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    return AttentionRun.from_array(a, tokens)


def _step(axis, labels) -> int:
    """Every how many of `labels` the axis labels, checking that it labels exactly those, from the first."""
    assert axis.tickmode == "array", axis.tickmode
    shown = list(axis.tickvals)
    step = len(labels) // len(shown) if len(shown) > 1 else len(labels)
    step = max(1, step if labels[::step] == shown else next(s for s in range(1, len(labels) + 1)
                                                             if labels[::s] == shown))
    assert list(axis.ticktext) == shown == list(labels)[::step]
    return step


def _fits(step: int, count: int, room_px: float, each_px: float) -> None:
    """Each shown label has the pixels it needs, and one fewer skipped would not fit (or none is)."""
    assert step * room_px / count >= each_px - 1e-6, (step, count, room_px, each_px)
    assert step == 1 or (step - 1) * room_px / count < each_px


def _plot_height(fig) -> float:
    return fig.layout.height - fig.layout.margin.t - fig.layout.margin.b


@pytest.mark.parametrize("layers, heads, n", [(6, 12, 16), (30, 9, 16), (2, 4, 40), (6, 12, 60), (1, 1, 1)])
def test_the_grid_labels_every_head_and_token_where_they_fit(layers, heads, n):
    tokens = SENTENCE if n == 16 else [f"w{i}" for i in range(n)]
    run = _run(layers, heads, tokens)
    f = focus.focus(run, min(1, n - 1))
    for direction in focus.DIRECTIONS:
        fig = focus_figures.focus_grid(f, direction, run.layer_ids)
        rows = layers * heads
        ys = focus_figures.head_row_labels(run.layer_ids, heads)
        y_step, x_step = _step(fig.layout.yaxis, ys), _step(fig.layout.xaxis, axis_labels(tokens))
        _fits(y_step, rows, max(_plot_height(fig), 1), TICK_LINE_PX)
        _fits(x_step, n, focus_figures.WIDE_PX, TURNED_PX)
        assert y_step <= 2 and x_step <= 2  # at most every other label
        if rows <= 100:  # MiniLM's 72 heads: every head labelled, each row a label's height
            assert y_step == 1 and _plot_height(fig) >= rows * TICK_LINE_PX
        if n <= focus_figures.WIDE_PX // TURNED_PX:  # the sentence: every token
            assert x_step == 1
    if (layers, heads, n) == (30, 9, 16):  # SmolLM2's 270 heads: every other one, rows half a label tall
        assert y_step == 2


@pytest.mark.parametrize("layers, heads, n", [(6, 12, 16), (30, 9, 16), (6, 12, 30)])
def test_the_summaries_and_the_map_label_every_layer_head_and_token_where_they_fit(layers, heads, n):
    tokens = SENTENCE if n == 16 else [f"w{i}" for i in range(n)]
    run = _run(layers, heads, tokens)
    f = focus.focus(run, 1)
    s = focus.summarize(f.attends_to, exclude=1)
    fig = focus_figures.focus_summary(f, focus.TO, s, run.layer_ids)
    plot = _plot_height(fig)
    layer_labels, head_labels = [f"L{i}" for i in range(layers)], [f"H{h}" for h in range(heads)]
    for k, suffix in enumerate(("", "2", "3", "4")):
        x, y = fig.layout["xaxis" + suffix], fig.layout["yaxis" + suffix]
        x_step = _step(x, axis_labels(tokens))
        _fits(x_step, n, (x.domain[1] - x.domain[0]) * focus_figures.SUMMARY_WIDE_PX, TURNED_PX)
        labels = layer_labels if k < 2 else head_labels
        y_step = _step(y, labels)
        _fits(y_step, len(labels), (y.domain[1] - y.domain[0]) * plot, TICK_LINE_PX)
        if n == 16:
            assert x_step == 1  # the sentence: no token skipped
        assert y_step == 1  # every layer and every head
    fig = focus_figures.head_max_map(s, run.layer_ids, focus.TO)
    assert _step(fig.layout.xaxis, head_labels) == 1 and _step(fig.layout.yaxis, layer_labels) == 1
    _fits(1, heads, focus_figures.WIDE_PX, TICK_CHAR_PX * len(head_labels[-1]))
    _fits(1, layers, _plot_height(fig), TICK_LINE_PX)
