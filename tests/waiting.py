"""Waiting in tests without ordering threads by sleeping: `wait_until` polls a condition until a
deadline (the one place in tests/ that may call `time.sleep`, between polls; tests/unit/test_suite_rules.py
checks it), and `blocked_in` says whether a thread is blocked on a lock or condition inside a given
function, so that a test can wait for that, not for a guess of how long it takes."""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float, *, interval_s: float = 0.05) -> T | bool:
    """Poll `predicate()` every `interval_s` until it returns something true (returned), or
    `timeout_s` seconds have passed (False: the caller says what did not happen). An exception
    from `predicate` (a process that died, say) goes up at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def blocked_in(thread: threading.Thread, function: str) -> bool:
    """Whether `thread` is now inside a call of `function` (its name), waiting: its innermost Python
    frame is threading's wait or acquire below that call, or the call itself (a plain Lock's acquire
    has no Python frame; then the thread may also be a few lines before that lock, which a test
    that waits for it must allow)."""
    frame = sys._current_frames().get(thread.ident)
    if frame is None:
        return False
    if frame.f_code.co_name == function:
        return True
    if frame.f_code.co_name not in ("wait", "wait_for", "acquire") or not frame.f_code.co_filename.endswith(
            "threading.py"):
        return False
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False
