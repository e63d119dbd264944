"""The scan's workers each run PyTorch on one thread, and PyTorch's thread count is the process's: after a
reduction, and after overlapping ones that end in any order, the count is what it was before (a leak left a
server on one core for every later forward and scan)."""

from __future__ import annotations

import threading

import torch

from mha_viz.scan import run as scan_run


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
        with scan_run.one_torch_thread_each():
            torch.set_num_threads(1)  # as its workers do
            first_in.set()
            second_in.wait(30)
        first_out.set()

    def second():
        first_in.wait(30)
        with scan_run.one_torch_thread_each():  # starts while the count is 1
            second_in.set()
            first_out.wait(30)  # ends after the first
    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert first_out.is_set() and torch.get_num_threads() == before
