"""The scan's workers each run PyTorch on one thread, and PyTorch's thread count is the process's: after a
reduction, and after overlapping ones that end in any order, the count is what it was before (a leak left a
server on one core for every later forward and scan)."""

from __future__ import annotations

import threading

import pytest
import torch

from mha_viz.scan import run as scan_run
from mha_viz.scan import torch_threads

pytestmark = pytest.mark.usefixtures("two_torch_threads")  # on 1 a worker's 1 would change nothing


class _Sums:
    threads = 2

    def __init__(self) -> None:
        self.added = []

    def add(self, probs, first, key_start, part) -> None:
        self.added.append((first, part))


def test_a_reduction_on_two_workers_leaves_the_count_as_it_was():
    before = torch.get_num_threads()
    both_inside = threading.Barrier(2, timeout=30)
    seen = []

    def job(first):
        def make():
            seen.append(torch.get_num_threads())  # a worker's own: 1
            both_inside.wait()  # the two workers at once, each having set its threads
            return first, 0, torch.zeros(1, 1, 1)
        return make
    sums = _Sums()
    scan_run.reduce_blocks([job(0), job(1)], sums)
    assert sorted(first for first, _ in sums.added) == [0, 1] and seen == [1, 1]
    assert torch.get_num_threads() == before


def test_overlapping_reductions_restore_the_first_count_whichever_ends_last():
    before = torch.get_num_threads()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with torch_threads.one_torch_thread_each():
            torch.set_num_threads(1)  # as its workers do
            first_in.set()
            second_in.wait(30)
        first_out.set()

    def second():
        first_in.wait(30)
        with torch_threads.one_torch_thread_each():  # starts while the count is 1
            second_in.set()
            first_out.wait(30)  # ends after the first
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert first_out.is_set() and torch.get_num_threads() == before


def _in_a_workers_window(then):
    """then() on a new thread that first reads PyTorch's count while a reduction's worker holds 1; returns what
    it read then and then()'s result, after the reduction ended."""
    inside, read = [threading.Event(), threading.Event()], threading.Event()
    seen = {}

    def make(first):
        def job():
            inside[first].set()
            assert read.wait(30)  # both workers hold 1 until the new thread has read
            return first, 0, torch.zeros(1, 1, 1)
        return job
    reduction = threading.Thread(target=lambda: scan_run.reduce_blocks([make(0), make(1)], _Sums()))
    reduction.start()
    assert all(event.wait(30) for event in inside)

    def session():
        seen["first read"] = torch.get_num_threads()
        read.set()
        reduction.join(60)
        seen["then"] = then()
    thread = threading.Thread(target=session)
    thread.start()
    thread.join(60)
    assert not reduction.is_alive() and "then" in seen
    return seen["first read"], seen["then"]


def test_a_run_that_first_read_the_count_during_a_reduction_leaves_the_process_as_it_was():
    """A Streamlit run that started while a scan's worker held 1 (its thread took 1) and then scans: its
    reduction comes back to the process's count, not to that 1 (which left the server on one core for good)."""
    before = torch_threads.process_count()

    def scan_then_read():
        scan_run.reduce_blocks([lambda: (0, 0, torch.zeros(1, 1, 1)), lambda: (1, 0, torch.zeros(1, 1, 1))],
                               _Sums())
        return torch.get_num_threads()
    first, after = _in_a_workers_window(scan_then_read)
    if first != 1:
        pytest.skip(f"a new thread read {first} while the workers held 1 (process count {before})")
    assert after == before  # the run's own thread, set back by its reduction
    assert torch_threads.process_count() == before  # every later thread's
    assert torch.get_num_threads() == before


def test_settle_gives_a_thread_that_took_a_workers_1_the_processs_count():
    before = torch_threads.process_count()

    def settle_then_read():
        torch_threads.settle()
        return torch.get_num_threads()
    first, after = _in_a_workers_window(settle_then_read)
    if first != 1:
        pytest.skip(f"a new thread read {first} while the workers held 1 (process count {before})")
    assert after == before


def test_a_worker_keeps_its_1_through_its_first_operation():
    """A new worker sets 1; another thread then writes the process's count; the worker's first operation must not
    copy that count over its 1 (it did when the worker had never read its count before setting it)."""
    before = torch.get_num_threads()
    set_one, written = threading.Event(), threading.Event()
    seen = {}

    def fn(_part):
        set_one.set()
        assert written.wait(30)
        x = torch.ones(256, 256)
        (x @ x).exp().sum()  # the thread's first operations
        seen["during"] = torch.get_num_threads()

    def worker():
        torch_threads.on_one_torch_thread(fn, 0, before)
        seen["after"] = torch.get_num_threads()
    thread = threading.Thread(target=worker)
    thread.start()
    assert set_one.wait(30)
    torch.set_num_threads(before)  # the process's count written while the worker holds 1
    written.set()
    thread.join(60)
    assert seen == {"during": 1, "after": before}


def test_one_thread_runs_its_block_on_one_and_a_thread_started_meanwhile_settles_back():
    """`one_thread`: the block's work on one PyTorch thread (as an operation of it reads the count), a run that starts
    meanwhile given the count from before by `settle` (not the 1 it first read), and both counts back after."""
    before = torch_threads.process_count()
    inside, other_done = threading.Event(), threading.Event()
    seen = {}

    def other_run():
        inside.wait(30)
        torch.get_num_threads()  # a new thread's first read (the block's 1 where PyTorch copies it)
        torch_threads.settle()  # what each run of the app does first
        seen["settled"] = torch.get_num_threads()
        other_done.set()
    worker = threading.Thread(target=other_run)
    worker.start()
    with torch_threads.one_thread():
        seen["block"] = torch.get_num_threads()
        inside.set()
        assert other_done.wait(30)
    worker.join(30)
    assert seen == {"block": 1, "settled": before} and before == 2
    assert torch.get_num_threads() == before and torch_threads.process_count() == before
