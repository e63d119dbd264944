"""What is written into mha-viz's cache once (converted GGUF weights, the compiled loops) is made by one process at a
time: `cache_folder.exclusive`, an exclusive lock on a file. A lock taken through another open file conflicts as
another process's would, so two threads stand for two processes here, ordered by events."""

from __future__ import annotations

import threading

import pytest

from mha_viz import compiled
from mha_viz_models.cache_folder import exclusive


def test_a_second_holder_waits_for_the_first(tmp_path):
    lock = tmp_path / ".lock"
    held, release = threading.Event(), threading.Event()
    order: list[str] = []

    def first():
        with exclusive(lock):
            order.append("first in")
            held.set()
            assert release.wait(30)
            order.append("first out")

    def on_wait():  # called while the first holds the lock: let it go
        order.append("second waits")
        release.set()

    def second():
        with exclusive(lock, on_wait):
            order.append("second in")

    a = threading.Thread(target=first)
    a.start()
    assert held.wait(30)
    b = threading.Thread(target=second)
    b.start()
    b.join(30)
    a.join(30)
    assert order == ["first in", "second waits", "first out", "second in"]


def test_the_loops_compile_under_a_lock_in_their_cache_folder():
    if compiled.cache_folder() is None:
        pytest.skip("no writable cache folder here: nothing to share, no lock")
    with compiled.compiling():
        assert (compiled.cache_folder() / ".compile.lock").exists()
