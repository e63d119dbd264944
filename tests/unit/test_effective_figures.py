"""The thumbnails of effective attention (mha_viz.drawing.effective): signed weights keep their sign when pooled
(a block's cell of largest |A|, planted here), each group's largest |A| is read before pooling, and the grid's
colours run from blue (negative) through white to red (positive)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mha_viz.drawing import effective


def _layer(layer, label, grouping, matrix, aggregated=None):
    """A stand-in for an EffectiveLayer held whole: its blocks are the matrix the views read, as one block."""
    shown = matrix if aggregated is None else aggregated
    return SimpleNamespace(layer=layer, label=label, grouping=grouping, matrix=matrix, aggregated=aggregated,
                           n=shown.shape[-1], shown_groups=shown.shape[0], blocks=lambda: iter([(0, shown)]))


def test_a_block_keeps_the_sign_of_its_largest_magnitude():
    a = np.zeros((2, 96, 96), dtype=np.float32)
    a[0, 10, 5] = -0.9  # one strong negative cell and a weaker positive one in the same 2 × 2 block
    a[0, 11, 4] = 0.3
    a[1, 50, 50] = 0.7
    pool = effective.PoolRows(2, 96, 48)
    pool.add(0, a)
    pooled = pool.finish()[0]
    assert pooled.shape == (2, 48, 48)
    assert pooled[0, 5, 2] == pytest.approx(-0.9) and pooled[1, 25, 25] == pytest.approx(0.7)
    assert np.count_nonzero(pooled[0]) == 1


def test_thumbnails_pad_rows_with_fewer_groups_and_read_the_largest_magnitude_whole():
    rng = np.random.default_rng(0)
    first, second = rng.normal(size=(4, 60, 60)).astype(np.float32), rng.normal(size=(2, 60, 60)).astype(np.float32)
    layers = [_layer(0, "gated DeltaNet: exact", "head", first),
              _layer(2, "Mamba: per channel", "channel group (mean)", np.zeros((8, 60, 60)), second)]
    th = effective.thumbnails(SimpleNamespace(layers=layers, mixing_shares=dict))
    assert th.pooled.shape == (2, 4, 48, 48) and th.layers == [0, 2]
    np.testing.assert_allclose(th.largest[0], np.abs(first).max(axis=(1, 2)))
    np.testing.assert_allclose(th.largest[1, :2], np.abs(second).max(axis=(1, 2)))  # the aggregated matrix
    assert np.isnan(th.largest[1, 2:]).all() and np.isnan(th.pooled[1, 2:]).all()
    fig = effective.grid(th)
    assert fig.layout.yaxis.ticktext == ("L0 · gated DeltaNet", "L2 · Mamba")
    assert len(fig.data[1].customdata) == 6  # one marker a group shown, none for the padding


def test_the_palette_runs_from_blue_through_white_to_red():
    pal = effective.diverging_palette().astype(int)
    assert pal.shape == (256, 3) and tuple(pal[255]) == (255, 255, 255)
    low, mid, high = pal[0], pal[127], pal[254]
    assert low[2] > low[0] and high[0] > high[2]  # blue below, red above
    assert min(mid) > 230  # white-ish at 0


def test_a_layers_thumbnails_hold_one_groups_copy_at_most():
    """Pooled one group at a time, the largest |A| read without |A|: numpy's temporaries (traced by tracemalloc)
    stay under two groups' n × n, where the layer holds four (its negated copy and |A| were each all four)."""
    import tracemalloc

    n = 1024
    m = np.random.default_rng(1).normal(size=(4, n, n)).astype(np.float32)
    layer = _layer(3, "gated DeltaNet: exact", "head", m)
    tracemalloc.start()
    try:
        th = effective.layer_thumbnails(layer)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 4 * n * n, f"{peak / 2**20:.1f} MiB at the peak"
    np.testing.assert_allclose(th.largest[0], np.abs(m).max(axis=(1, 2)))


@pytest.mark.parametrize("n,step", [(96, 7), (30, 4), (200, 64)])
def test_thumbnails_from_blocks_of_rows_are_those_of_the_whole_matrix(n, step):
    """Rows handed over in blocks (out of order too) pool to the whole matrix's thumbnails: PyTorch's adaptive
    max-pool of the matrix and of its negation, the sign of the larger |A| kept (n ≤ 48 is not pooled)."""
    import torch

    m = np.random.default_rng(2).normal(size=(3, n, n)).astype(np.float32)
    pool = effective.PoolRows(3, n)
    for first in reversed(range(0, n, step)):
        pool.add(first, m[:, first:first + step])
    pooled, largest = pool.finish()
    x = torch.as_tensor(m)[:, None]
    side = min(48, n)
    top = torch.nn.functional.adaptive_max_pool2d(x, side)[:, 0].numpy()
    bottom = -torch.nn.functional.adaptive_max_pool2d(-x, side)[:, 0].numpy()
    np.testing.assert_array_equal(pooled, np.where(top >= -bottom, top, bottom))
    np.testing.assert_array_equal(largest, np.abs(m).max(axis=(1, 2)))
