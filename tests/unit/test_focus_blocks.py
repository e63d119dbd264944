"""Token focus on a long text: past `MOST_COLUMNS` positions a grid's columns are blocks of positions, each
the block's largest weight (at 8,192 tokens a grid of SmolLM2's 270 heads was 2.2 million cells, 12 MB a
chart). Checked on planted weights against a loop over the blocks: a single strong weight stays visible in
its block, every position is in exactly one block, the position in focus is framed in its block's column,
and no cell is clickable as if it were one position. Up to MOST_COLUMNS positions the grid is as it was."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.drawing import focus as focus_figures
from mha_viz.views import focus

LAYERS, HEADS = 3, 4


def _focus(m: int, index: int, planted: tuple[int, int, float] | None = None) -> focus.Focus:
    """A Focus over m positions, small random weights, and `planted` = (row, position, weight) set."""
    rng = np.random.default_rng(m)
    to = (rng.random((LAYERS, HEADS, m)) * 1e-3).astype(np.float32)
    if planted:
        row, position, weight = planted
        to.reshape(LAYERS * HEADS, m)[row, position] = weight
    labels = [f"t{i}" for i in range(m)]
    return focus.Focus(index=index, labels=labels, attends_to=to, attended_by=to.copy())


def _frame(fig) -> tuple[float, float]:
    rect = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rect) == 1
    return rect[0].x0, rect[0].x1


@pytest.mark.parametrize("m", [focus_figures.MOST_COLUMNS + 1, 3_000, 8_192])
def test_a_long_grid_draws_blocks_of_positions_each_its_largest_weight(m):
    position, index = m - 7, m // 3
    f = _focus(m, index, planted=(5, position, 0.9))
    fig = focus_figures.focus_grid(f, focus.TO, list(range(LAYERS)), clickable=True)
    z = np.asarray(fig.data[0].z)
    assert z.shape[0] == LAYERS * HEADS and z.shape[1] <= focus_figures.MOST_COLUMNS
    assert len(fig.data) == 1  # no cell markers: a block is no one position to click
    # the blocks, read back from the labels' spans, cover every position once, in order
    spans = [label.split(":")[0] for label in fig.data[0].x]
    bounds = [(int(s.split("–")[0]), int(s.split("–")[-1]) + 1) for s in spans]
    assert bounds[0][0] == 0 and bounds[-1][1] == m
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert len(set(fig.data[0].x)) == len(fig.data[0].x)
    # each cell is the largest weight of its block (a loop, not reduceat)
    values = f.attends_to.reshape(LAYERS * HEADS, m)
    expected = np.array([[row[a:b].max() for a, b in bounds] for row in values])
    np.testing.assert_array_equal(z, expected)
    # the planted weight shows in its block's column, and the frame sits on the block of the position in focus
    block = next(k for k, (a, b) in enumerate(bounds) if a <= position < b)
    assert z[5, block] == pytest.approx(0.9)
    framed = next(k for k, (a, b) in enumerate(bounds) if a <= index < b)
    assert _frame(fig) == (framed - 0.5, framed + 0.5)
    title = fig.layout.title.text.replace("<br>", " ")
    widths = {b - a for a, b in bounds}
    assert f"largest weight of {min(widths)}" in title and f"{max(widths)} positions" in title, title


def test_a_grid_up_to_most_columns_keeps_every_position():
    m = focus_figures.MOST_COLUMNS
    f = _focus(m, 10, planted=(2, 3, 0.5))
    fig = focus_figures.focus_grid(f, focus.BY, list(range(LAYERS)))
    z = np.asarray(fig.data[0].z)
    np.testing.assert_array_equal(z, f.attended_by.reshape(LAYERS * HEADS, m))
    assert _frame(fig) == (9.5, 10.5)
    assert "largest" not in fig.layout.title.text
