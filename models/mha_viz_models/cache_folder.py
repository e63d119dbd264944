"""mha-viz's cache folder, the one place its location is decided: converted GGUF weights (`loading.gguf_cache`),
the compiled metric loops (`mha_viz.compiled`), stored corpus results and a model's weights-only scores
(`mha_viz.circuits.kept`) are kept in folders under it; and what is
written there once is made by one process at a time (`exclusive`)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


def cache_root() -> Path:
    """Where mha-viz keeps what it computes once: $MHA_VIZ_CACHE_DIR, else ~/.cache/mha-viz."""
    return Path(os.environ.get("MHA_VIZ_CACHE_DIR") or Path.home() / ".cache" / "mha-viz")


@contextmanager
def exclusive(lock_file: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Inside: this process alone, among those that ask for the same `lock_file` (an exclusive lock on it; `on_wait`
    is called first when another holds it). Where the system has no `fcntl`, no lock: each process goes in."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield
        return
    with open(lock_file, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
