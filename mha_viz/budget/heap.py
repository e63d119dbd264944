"""What the garbage collector walks. Streamlit collects garbage after every run of the script (`gc.collect(2)`,
its `runner.postScriptGC`), in the script's thread, holding the interpreter's lock, before the run's last message
leaves: the time grows with every object the process tracks. Most of those live as long as the process: the
libraries' (about half a million objects once the pages' libraries are imported) and each loaded model's
(SmolLM2 with its tokenizer: about 200,000, 0.09–0.11 s a collection, measured on 2 cores). `settle` collects once,
then freezes what is alive (`gc.freeze`): no later collection walks it. `release` gives frozen objects back to
the collector when a model leaves the cache, so that what it held in reference cycles can go: a walk of every object
the process holds (0.6–1.4 s in a test process of 650,000–830,000 objects, 65 of them 49 s of the app tier's 12
minutes of processes' time), taken where some of the model is still alive. A model dropped from the cache is nearly
always freed at once by its reference count, its tensors with it; then `release` only settles, unless the frozen
objects have doubled since the last walk (`GROWTH`): what sessions held when they were frozen and dropped since, in
cycles, is then collected too, and the walks cost in all about twice the last one.

Freezing keeps what is alive at that moment, another session's short-lived objects too: those freed by their
reference count (nearly all) go as usual; one caught in a cycle waits for the next `release`.

`paused` holds the collector off while a model loads: a load makes objects by the hundred thousand (SmolLM2's GGUF
file read field by field, its tokenizer's vocabulary), and each batch of them set off a collection of every object
the process tracks that was not frozen: 6 full walks, 0.52 of a 3.7-s first load of SmolLM2 in a process that had
imported only the libraries, more in a server or a test process that holds more. The cache settles (one walk) right
after."""

from __future__ import annotations

import gc
import threading
import weakref
from contextlib import contextmanager
from typing import Iterable, Iterator

_lock = threading.Lock()  # one settle or release at a time
GROWTH = 2.0  # a release walks every object once the frozen ones number this many times those after the last walk
_walked = 0  # the frozen objects after the last walk
_pause_lock = threading.Lock()
_pauses = 0  # loads under way (`paused`)
_enabled_before = True  # whether the collector ran before the first of them


def settle() -> None:
    """Collect the garbage there is, then leave what is alive out of every later collection."""
    with _lock:
        gc.collect()
        gc.freeze()


def release(held: Iterable[weakref.ref] | None = None) -> bool:
    """Hand every frozen object back to the collector, collect, and freeze what is still alive; whether it did.
    `held`: weak references to what the release is for (a model that left the cache, its tensors): where every one is
    already dead, no cycle holds them, and it only settles while the frozen objects have grown by less than GROWTH
    since the last walk. None: what it is for is not known, and it collects."""
    global _walked
    if held is not None and all(ref() is None for ref in held) and gc.get_freeze_count() < GROWTH * _walked:
        settle()
        return False
    with _lock:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _walked = gc.get_freeze_count()
    return True


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collection while the block runs, nor while another thread's `paused` block does; the collector
    back as it was once the last of them ends (left off where it was off before the first)."""
    global _pauses, _enabled_before
    with _pause_lock:
        if _pauses == 0:
            _enabled_before = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _enabled_before:
                gc.enable()
