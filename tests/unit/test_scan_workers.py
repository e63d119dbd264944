"""`scan.run.reduce_blocks` (each worker computes whole blocks with one PyTorch thread and reduces them into a part
of the sums of its own) against the plain computation: the same blocks added one after the other by
`BlockSums.add`, split over threads within each block. Sums, cells, kept keys, weights and rests must agree (the
sums within float64 rounding: the parts add up in another order)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_viz.metrics import row_table
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import TextFacts
from mha_viz.scan.run import reduce_blocks
from mha_viz.scan.torch_threads import process_count

pytestmark = pytest.mark.usefixtures("two_torch_threads")  # the counts a worker sets and restores differ

N, H = 97, 3


def _blocks(step: int = 7) -> list[tuple[int, int, torch.Tensor]]:
    """A causal text's probabilities (H, N, N) cut in blocks of `step` rows, each against the keys it may see."""
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(H, N, N, generator=g) * 3
    scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    probs = scores.softmax(-1)
    return [(first, 0, probs[:, first:first + step, :first + step].contiguous()) for first in range(0, N, step)]


def _sums(threads: int) -> BlockSums:
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 5, N)
    before = np.concatenate([[-1], ids[:-1]])
    masks = np.stack([ids == 0, ids == 1]).astype(np.float32)  # the sep and punct records' keys
    facts = TextFacts(N, True, 1, ids, masks, np.stack([ids, before]), None, row_table.TABLE)
    return BlockSums(H, facts, top_k=4, min_weight=0.01, thumb=12, threads=threads)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_workers_reduce_as_the_blocks_added_one_by_one(threads):
    blocks = _blocks()
    plain = _sums(threads)
    for first, key_start, probs in blocks:
        plain.add(probs.numpy(), first, key_start)
    ours = _sums(threads)
    seen_threads = []

    def job(block):
        seen_threads.append(torch.get_num_threads())
        return block
    reduce_blocks([lambda b=b: job(b) for b in blocks], ours)
    (a, cells_a), (b, cells_b) = plain.finish(), ours.finish()
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(cells_b, cells_a)
    np.testing.assert_array_equal(ours.keys, plain.keys)
    np.testing.assert_array_equal(ours.weights, plain.weights)
    np.testing.assert_array_equal(ours.rest, plain.rest)
    assert len(seen_threads) == len(blocks)
    if threads > 1:
        assert set(seen_threads) == {1}  # each worker computes with one PyTorch thread


def test_an_error_in_a_job_is_raised_and_the_thread_count_comes_back():
    before = torch.get_num_threads()
    blocks = _blocks()

    def broken():
        raise ValueError("planted")
    with pytest.raises(ValueError, match="planted"):
        reduce_blocks([lambda b=b: b for b in blocks[:3]] + [broken] + [lambda b=b: b for b in blocks[3:]], _sums(2))
    assert torch.get_num_threads() == before


def test_the_caller_and_the_process_are_left_at_the_processs_count():
    """Each worker computes with one PyTorch thread and sets its own count back after; the caller's count (the
    forward's) and the one every new thread reads are the process's, as before."""
    before = process_count()
    reduce_blocks([lambda b=b: b for b in _blocks()], _sums(2))
    assert torch.get_num_threads() == before
    assert process_count() == before
