"""The grid of a method over a task (`figures.task_grid`): on a result planted by hand, the grid's cells are the
means, each cell's hover gives its interval and p-value, and exactly the heads whose interval holds 0 are crossed;
the default title names the method and the set."""

from __future__ import annotations

import numpy as np

from mha_viz import figures
from mha_viz.features.task.figures import MARK
from mha_viz.tasks.dla_set import TaskDirectLogit
from mha_viz.tasks.patching_set import TaskPatching


def _title(fig) -> str:
    return fig.layout.title.text.replace("<br>", " ")  # wrapped to the figure's width


def _patching() -> TaskPatching:
    mean = np.array([[0.5, -0.2, 0.0], [0.1, 0.9, -0.6]], np.float32)
    low = mean - np.array([[0.1, 0.3, 0.2], [0.2, 0.1, 0.1]], np.float32)  # (0, 2), (1, 0) hold 0 with high
    high = mean + 0.05
    p = np.array([[0.01, 0.4, 0.9], [0.3, 0.001, 0.02]], np.float32)
    per_pair = np.stack([mean, mean])
    return TaskPatching("denoise", "normalised", np.ones(2, np.float32), np.zeros(2, np.float32), per_pair=per_pair,
                        mean=mean, low=low, high=high, p_value=p, kept=[0, 3], left_out={}, source="ioi(n=4, seed=0)",
                        level=0.95, resamples=100, seed=0)


def test_the_cells_are_the_means_and_the_crosses_are_the_intervals_that_hold_zero():
    result = _patching()
    fig = figures.task_grid(result)
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=np.float64), result.mean)
    crosses = next(t for t in fig.data if t.name == MARK)
    assert sorted(zip(crosses.y, crosses.x)) == [(0, 2), (1, 0)]
    assert sorted(zip(*np.nonzero(result.crosses_zero))) == [(0, 2), (1, 0)]
    hover = fig.data[1].text  # layer-major, one a cell
    assert "[+0.4, +0.55], p = 0.01" in hover[0], hover[0]
    assert "mean over 2 pairs; 95 % interval" in hover[0]
    assert MARK in hover[2] and MARK in hover[3] and MARK not in hover[1] and MARK not in hover[4]
    assert "Restored fraction (normalised), mean over ioi(n=4, seed=0)" in _title(fig)


def test_direct_logit_over_a_task_is_titled_in_logits():
    r = _patching()
    dla = TaskDirectLogit(np.zeros(2, np.float32), per_pair=r.per_pair, mean=r.mean, low=r.low, high=r.high,
                          p_value=r.p_value, kept=r.kept, left_out={}, source="greater_than(n=4, seed=1)", level=0.9,
                          resamples=100, seed=0)
    fig = figures.task_grid(dla)
    assert "Direct logit attribution (logits), mean over greater_than" in _title(fig)
    assert "90 % interval" in fig.data[1].text[0]


def test_the_rows_are_labelled_with_the_models_layer_numbers():
    fig = figures.task_grid(_patching(), layer_ids=[1, 3])  # a hybrid's softmax layers
    assert list(fig.layout.yaxis.ticktext) == [1, 3]
