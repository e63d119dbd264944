"""The host copier's own logic on the CPU (`mha_viz.capture.transfer.HostCopier`), with the CUDA
part (`transfer.Staging`: pinned buffers, events, a copy stream) replaced by `CpuStaging`, which
copies at once and writes down what it was asked. A tensor larger than a buffer goes in chunks
that rotate over the buffers, each chunk sent into a buffer only once that buffer was received,
chunk i + 1 sent before chunk i is received (the overlap), the host array equal to the source bit
for bit; an error in the copying thread reaches the caller and leaves no thread behind.
tests/models/test_cuda.py runs the real copy where a GPU is."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from mha_viz.capture import transfer
from tests.staging import CHUNK, CpuStaging

THREAD = "mha-viz-host-copy"  # the copying thread's name


@pytest.fixture
def staging(monkeypatch):
    """A fresh CpuStaging class (its own list of sets taken), CHUNK elements per chunk."""
    monkeypatch.setattr(transfer, "CHUNK_BYTES", 4 * CHUNK)
    return type("Staging", (CpuStaging,), {"sets": []})


def _copier_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


def _chunks(n: int, offset: int) -> list[tuple[float, int]]:
    """(first value, length) of each chunk of a tensor of n elements holding offset, offset + 1, …"""
    return [(float(offset + s), min(CHUNK, n - s)) for s in range(0, n, CHUNK)]


@pytest.mark.parametrize("buffers", [2, 3])
@pytest.mark.parametrize("shape", [(3, 12345), (2, 7, 2001), (4, 1000), (5, 3)],
                         ids=["partial-last-chunk", "3d", "whole-chunks", "smaller-than-a-chunk"])
def test_chunks_rotate_over_the_buffers_and_land_exactly(staging, shape, buffers):
    staging.buffers_per_set = buffers
    n = int(np.prod(shape[1:]))
    source = torch.arange(shape[0] * n, dtype=torch.float32).view(shape)
    dest = np.full(shape, np.nan, np.float32)
    with transfer.HostCopier(dest, staging=staging) as copier:
        for i in range(shape[0]):
            copier.put(i, source[i] * 1)  # a temporary the caller drops at once
    assert np.array_equal(dest, source.numpy())
    assert not _copier_threads()
    [st] = staging.sets  # one set for the whole copy, given back at the end
    assert st.given_back and not any(st.full)

    sends = [e for e in st.log if e[0] == "send"]
    receives = [e for e in st.log if e[0] == "receive"]
    want = [c for i in range(shape[0]) for c in _chunks(n, i * n)]
    assert [e[2:] for e in sends] == want  # every chunk, in order, none twice
    assert [e[2:] for e in receives] == want
    assert [e[1] for e in sends] == [k % buffers for k in range(len(want))]  # rotation, across tensors
    assert [e[1] for e in receives] == [e[1] for e in sends]
    order = {e: k for k, e in enumerate(st.log)}
    for k in range(1, len(want)):  # chunk k is on its way while chunk k - 1 drains
        assert order[sends[k]] < order[receives[k - 1]] < order[receives[k]]
    waits = [k for k, e in enumerate(st.log) if e[0] == "wait"]
    assert [st.log[k][1] for k in waits] == [("computed", float(i * n)) for i in range(shape[0])]
    for i, k in enumerate(waits):  # each tensor's sends wait for the mark that it was computed
        assert order[sends[i * len(_chunks(n, 0))]] > k


def test_half_precision_is_widened_on_its_way(staging):
    source = torch.randn(2, 2500, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    dest = np.zeros((2, 2500), np.float32)
    with transfer.HostCopier(dest, staging=staging) as copier:
        for i in range(2):
            copier.put(i, source[i])
    assert np.array_equal(dest, source.float().numpy())


def test_tensors_that_need_no_staging_are_copied_straight():
    """CUDA's staging on a CPU tensor: copied in place, no thread, no CUDA call."""
    source = torch.randn(3, 4, 5)
    dest = np.zeros((3, 4, 5), np.float32)
    with transfer.HostCopier(dest) as copier:
        for i in range(3):
            copier.put(i, source[i])
            assert not _copier_threads()
    assert np.array_equal(dest, source.numpy())


def _run_or_hang(body, seconds: float = 120.0) -> BaseException | None:
    """Run `body` in a thread of its own; its exception, or a failure if it has not returned after
    `seconds` (a copier that hangs on an error)."""
    caught: list[BaseException] = []

    def target():
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            caught.append(exc)

    runner = threading.Thread(target=target, daemon=True)
    runner.start()
    runner.join(seconds)
    assert not runner.is_alive(), "the caller hangs after an error in the copying thread"
    return caught[0] if caught else None


# 6 tensors of 5 chunks: 30 sends and 30 receives, 60 calls; the first, one mid-way, the last
@pytest.mark.parametrize("fail_at", [0, 17, 59], ids=["first-send", "mid-way", "last-receive"])
@pytest.mark.parametrize("closing", ["with", "finish"])
def test_an_error_in_the_copying_thread_reaches_the_caller(staging, fail_at, closing):
    staging.fail_at = fail_at
    dest = np.zeros((6, 5 * CHUNK), np.float32)

    def body():
        if closing == "with":  # as `analyze` uses it: the thread is always ended
            with transfer.HostCopier(dest, staging=staging) as copier:
                for i in range(6):
                    copier.put(i, torch.ones(5 * CHUNK))
        else:
            copier = transfer.HostCopier(dest, staging=staging)
            try:
                for i in range(6):
                    copier.put(i, torch.ones(5 * CHUNK))
            finally:
                copier.finish()

    error = _run_or_hang(body)
    assert isinstance(error, RuntimeError) and "the device copy failed" in str(error)
    assert not _copier_threads()
    assert all(st.given_back for st in staging.sets)



def test_a_long_runs_cpu_block_is_handed_over_as_its_own_memory(staging):
    """`scan.rows.host_part`, each block of a long run's rows on its way to a view: a contiguous float32 block on the
    CPU is its own memory; a strided one or a half-precision one a float32 copy of it; and where the staging takes
    the CPU's tensors (this stand-in, as CUDA's takes a GPU's), the block crosses through it."""
    from mha_viz.scan.rows import host_part, widened

    block = torch.rand(2, 3, 5)
    own = host_part(block)
    assert own.dtype == np.float32 and np.shares_memory(own, block.numpy())
    for other in (torch.rand(2, 3, 6)[..., :-1], block.to(torch.bfloat16)):
        got = host_part(other)
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, other.float().numpy())
    crossed = host_part(block, staging)
    assert staging.sets and not np.shares_memory(crossed, block.numpy())
    np.testing.assert_array_equal(crossed, block.numpy())
    wide = widened(own, 2, 9)  # keys 2 … 6 of 9: the others 0
    assert wide.shape == (2, 3, 9) and not wide[..., :2].any() and not wide[..., 7:].any()
    np.testing.assert_array_equal(wide[..., 2:7], own)
    assert widened(own, 0, 5) is own


def test_a_copy_asked_for_in_inference_mode(staging):
    """The runs copy under `torch.inference_mode()`: the host slices and a new set's buffers made there are inference
    tensors, which the copying thread writes in place. Inference mode is a thread's own, so that thread enters it too
    (a GPU run failed: "Inplace update to inference tensor outside InferenceMode")."""
    source = torch.arange(3 * 12345, dtype=torch.float32).view(3, 12345)
    dest = np.full(source.shape, np.nan, np.float32)
    with torch.inference_mode(), transfer.HostCopier(dest, staging=staging) as copier:
        for i in range(3):
            copier.put(i, source[i] * 1)
    assert np.array_equal(dest, source.numpy())
    assert not _copier_threads()
