"""PyTorch's intra-op thread count while the scan's workers each compute with one thread.

PyTorch keeps one count a thread (its OpenMP setting) and one for the process: `torch.set_num_threads` on any
thread writes both, and a thread's first read (or first operation) copies the process's into its own. While a
worker has set 1, every thread that reads for the first time therefore takes 1 for its whole life: a Streamlit
run that started then ran its forwards on one core, and if it went on to start a reduction of its own, that
reduction's "count before" was 1 and set the whole server to one core for good. Here:

- a reduction's count to come back to is the process's (`process_count`, read on a new thread while no
  reduction runs), never the caller's own, which may be such a 1;
- a worker reads its count before setting 1 (`on_one_torch_thread`): else its first operation copies the
  process's count over the 1;
- `settle` gives a thread that took a worker's 1 the process's count back (each run of the app calls it).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

import torch

_LOCK = threading.Lock()
_inside = 0  # reductions under way (`one_torch_thread_each`)
_before = 0  # the process's count before the first of them


def process_count() -> int:
    """The count a thread that never set its own reads: the process's (the last any thread set), read on a new
    thread (about 0.1 ms)."""
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(torch.get_num_threads()), name="mha-viz-thread-count")
    reader.start()
    reader.join()
    return seen[0]


def _intended() -> int:
    """The count to run at: the one from before the reductions under way, else the process's (called under _LOCK)."""
    return _before if _inside else process_count()


@contextmanager
def one_torch_thread_each() -> Iterator[int]:
    """While workers each set PyTorch's threads to 1 (`on_one_torch_thread`), yielding the count to set them back
    to: the process's before the first of any overlapping reductions. The caller's own count is set to it when
    its reduction ends, and the process's when the last one does."""
    global _inside, _before
    with _LOCK:
        if _inside == 0:
            _before = process_count()
        _inside += 1
        count = _before
    try:
        yield count
    finally:
        with _LOCK:
            _inside -= 1
            torch.set_num_threads(count)  # this thread's, and the process's (the last to end writes it last)


@contextmanager
def _on_one(after: int) -> Iterator[None]:
    """This thread's PyTorch intra-op threads at 1 for the block, then `after`."""
    torch.get_num_threads()  # the thread's first read, which copies the process's count, before the 1
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(after)


def on_one_torch_thread(fn: Callable[[int], None], part: int, after: int) -> None:
    """fn(part) with PyTorch's intra-op threads at 1 on this worker, then `after` (the caller's count: what the
    worker read itself may be another worker's 1)."""
    with _on_one(after):
        fn(part)


@contextmanager
def one_thread() -> Iterator[None]:
    """This thread's PyTorch work on one intra-op thread for the block, the count it ran at back after. Meanwhile the
    process's count is 1 too (PyTorch keeps one setting for both): a thread that first reads then is given the count
    back by `settle`, as during a scan's reduction (`one_torch_thread_each`)."""
    with one_torch_thread_each() as after, _on_one(after):
        yield


def settle() -> None:
    """This thread's count set to the one to run at, if it differs (a thread that first read while a worker had
    set 1 holds 1)."""
    with _LOCK:
        target = _intended()
        if torch.get_num_threads() != target:
            torch.set_num_threads(target)
