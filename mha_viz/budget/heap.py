"""What the garbage collector walks. Streamlit collects garbage after every run of the script (`gc.collect(2)`,
its `runner.postScriptGC`), in the script's thread, holding the interpreter's lock, before the run's last message
leaves: the time grows with every object the process tracks. Most of those live as long as the process: the
libraries' (about half a million objects once the pages' libraries are imported) and each loaded model's
(SmolLM2 with its tokenizer: about 200,000, 0.09–0.11 s a collection, measured on 2 cores). `settle` collects once,
then freezes what is alive (`gc.freeze`): no later collection walks it. `release` gives frozen objects back to
the collector when a model leaves the cache, so that what it held in reference cycles can go.

Freezing keeps what is alive at that moment, another session's short-lived objects too: those freed by their
reference count (nearly all) go as usual; one caught in a cycle waits for the next `release`."""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()  # one settle or release at a time


def settle() -> None:
    """Collect the garbage there is, then leave what is alive out of every later collection."""
    with _lock:
        gc.collect()
        gc.freeze()


def release() -> None:
    """Hand every frozen object back to the collector, collect, and freeze what is still alive."""
    with _lock:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
