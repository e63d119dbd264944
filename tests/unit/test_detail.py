"""Level of detail for one head: block max/mean keep a planted cell, words merge pieces."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import AttentionRun
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import style as figure_style
from mha_viz.views import detail


def _softmax_rows(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_planted_cell_survives_downsampling_at_2048():
    """One weight of 0.9 among ~1/2048 ones is the maximum of its block, in the right block."""
    n, size = 2048, 128
    a = np.full((n, n), 0.1 / (n - 1), dtype=np.float32)
    i, j = 1234, 77
    a[i] = 0.1 / (n - 1)
    a[i, j] = 0.9
    top, mean, edges = detail.pooled(a, size)
    assert top.shape == (size, size) and edges[0] == 0 and edges[-1] == n
    bi, bj = np.searchsorted(edges, i, "right") - 1, np.searchsorted(edges, j, "right") - 1
    assert top[bi, bj] == pytest.approx(0.9)
    assert np.argwhere(top == top.max()).tolist() == [[bi, bj]]
    block = a[edges[bi]:edges[bi + 1], edges[bj]:edges[bj + 1]]
    assert mean[bi, bj] == pytest.approx(block.mean(), rel=1e-5)  # the mean is diluted, the max is not
    assert mean[bi, bj] < 0.1


def test_blocks_cover_every_token_once_for_awkward_sizes():
    for n in (1, 7, 129, 1000):
        edges = detail.block_edges(n, 128)
        assert edges[0] == 0 and edges[-1] == n and (np.diff(edges) >= 1).all() and len(edges) - 1 <= 128


def test_word_level_by_hand_and_rows_sum_to_one():
    """[CLS] play ##ing ball [SEP]: words [CLS] | playing | ball | [SEP]."""
    rng = np.random.default_rng(0)
    a = _softmax_rows(rng.normal(size=(5, 5)))
    word_ids = [0, 1, 1, 2, 3]
    w = detail.word_level(a, word_ids)
    assert w.shape == (4, 4)
    np.testing.assert_allclose(w.sum(1), 1.0, atol=1e-6)
    # query word "playing" (rows 1, 2): mean over its rows of the sum over key word "playing" (cols 1, 2)
    assert w[1, 1] == pytest.approx(((a[1, 1] + a[1, 2]) + (a[2, 1] + a[2, 2])) / 2, rel=1e-6)
    assert w[0, 2] == pytest.approx(a[0, 3], rel=1e-6)
    assert detail.word_labels(["[CLS]", "play", "ing", "ball", "[SEP]"], word_ids) == [
        "[CLS]", "playing", "ball", "[SEP]"]


def test_pooled_figure_payload_is_bounded_at_2048():
    n = 2048
    rng = np.random.default_rng(1)
    a = _softmax_rows(rng.normal(size=(1, 1, n, n)).astype(np.float32))
    run = AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=a.astype(np.float32))
    fig = head_figures.head_pooled(run, 0, 0)
    size = len(fig.to_json())
    assert size < 400_000, size  # 128² blocks, max and mean: not n² numbers
    # each block is labelled by its token range: 2,048 tokens in 128 blocks of 16
    assert [figure_style.label_text(x) for x in fig.data[0].x[:2]] == ["0–15: t0 t1 t2 t3 t4 t5 t6 t7…",
                                                               "16–31: t16 t17 t18 t19 t20 t21…"]
    assert fig.layout.xaxis.showticklabels is False  # 128 ranges of 16 tokens: named by hover


def test_blocks_of_one_token_are_labelled_on_the_axes():
    """A text of at most POOLED_SIZE tokens in blocks has one token a block: its axes name them (a user's 29 tokens
    in "all tokens, in blocks" showed 29 unlabelled blocks)."""
    n = 29
    a = np.tile(np.eye(n, dtype=np.float32), (1, 1, 1, 1))
    run = AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=a)
    fig = head_figures.head_pooled(run, 0, 0)
    assert fig.layout.xaxis.showticklabels is not False and fig.layout.yaxis.showticklabels is not False
    assert [figure_style.label_text(x) for x in fig.data[0].x] == [f"{i}: t{i}" for i in range(n)]


def test_window_shows_only_its_tokens():
    n = 40
    a = np.tile(np.eye(n, dtype=np.float32), (1, 1, 1, 1))
    run = AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=a)
    fig = head_figures.head_heatmap(run, 0, 0, window=(10, 20))
    assert [figure_style.label_text(x) for x in fig.data[0].x] == [f"t{i}" for i in range(10, 20)]
    assert "tokens 10–19 of 40" in fig.layout.title.text


def test_every_token_view_of_a_long_input_is_an_image_under_1mb():
    """n = 512: one pixel a cell (palette PNG) plus a block grid for hover, not n² floats."""
    n = 512
    rng = np.random.default_rng(2)
    a = _softmax_rows(rng.normal(size=(1, 1, n, n)) * 3).astype(np.float32)
    run = AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=a)
    fig = head_figures.head_heatmap(run, 0, 0)
    assert fig.data[0].type == "image" and fig.data[1].type == "heatmap"
    assert len(fig.to_json()) < 1_000_000
    top = np.asarray(fig.data[1].z)
    assert top.shape == (128, 128) and top.max() == pytest.approx(a.max(), rel=1e-6)


def test_wide_window_image_is_labelled_with_text_positions():
    """A window wider than 256 tokens is drawn as an image whose ticks and hover count from
    the window's start in the text, not from 0."""
    n = 400
    a = np.tile(np.eye(n, dtype=np.float32), (1, 1, 1, 1))
    run = AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=a)
    fig = head_figures.head_heatmap(run, 0, 0, window=(100, 400))
    assert fig.data[0].type == "image" and fig.data[0].x0 == 100
    assert fig.layout.xaxis.ticktext[0].startswith("100: t100")
    assert min(fig.data[1].x) >= 100 and max(fig.data[1].x) < 400
