"""Corpus results kept for every visitor of one server: the last few in memory, more on disk, keyed
by what they were computed from (model, documents, options); and the jobs under way, so that a
second request for the same statistics waits for the first instead of computing them again.

Thread-safe (Streamlit sessions are threads of one process). On disk each result is a folder named by a hash of
(version, key), written whole and renamed into place (`cache_folder.write_whole`); a folder that cannot be read is
removed and counts as missing, as does one another process pruned while it was read; past `disk` folders the least
recently used go (a read touches its folder: `cache_folder.prune`, `touch`). `statistics_store()` is the process's
store of corpus statistics (`CorpusStats`), under the cache folder's `corpus/`."""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Hashable

from mha_viz.corpus.stats import CorpusStats
from mha_viz_models.cache_folder import cache_root, prune, remove, touch, write_whole

log = logging.getLogger("mha_viz.corpus")

CACHE_VERSION = 2  # bump when the statistics change: older folders are then never read (2: head examples kept)


class ResultStore:
    def __init__(self, root: Callable[[], Path], version: int, *, save: Callable[[Any, Path], None],
                 load: Callable[[Path], Any], memory: int = 8, disk: int = 64) -> None:
        """`root()`: the folder of the results (asked each time: settings may change it);
        `version`: part of every key, bumped when the results change meaning; `save(result,
        folder)` / `load(folder)`: a result to and from a folder; `memory`, `disk`: how many to
        keep in each."""
        self._root, self._version, self._save, self._load = root, version, save, load
        self._memory_max, self._disk_max = memory, disk
        self._memory: OrderedDict = OrderedDict()
        self._running: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()

    def folder(self, key: Hashable) -> Path:
        return self._root() / hashlib.sha256(repr((self._version, key)).encode()).hexdigest()[:24]

    def get(self, key: Hashable):
        """The result for `key` from memory, else from disk, else None."""
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
        folder = self.folder(key)
        if not folder.is_dir():
            return None
        try:
            result = self._load(folder)
        except Exception:  # noqa: BLE001 - recomputed rather than shown broken, and replaced
            if folder.is_dir():  # not pruned by another process while read (`cache_folder.remove`)
                log.exception("corpus cache %s unreadable: removed", folder)
                remove(folder)
            return None
        if not folder.is_dir():  # pruned while read: what was read may lack its optional files
            return None
        touch(folder)  # recently used: the last to be pruned
        self._remember(key, result)
        return result

    def put(self, key: Hashable, result) -> None:
        """Keep `result` in memory and on disk (a disk that cannot be written is logged, not raised)."""
        self._remember(key, result)
        folder = self.folder(key)
        try:
            write_whole(folder, lambda tmp: self._save(result, tmp), folder=True)
        except OSError:  # the rename fails where another process wrote it first: theirs is as good
            if not folder.is_dir():
                log.exception("could not keep the corpus statistics on disk")
        self.prune()

    def prune(self) -> None:
        """Remove all but the `disk` most recently used results, and stale temporary folders (files beside them
        are not results: neither counted nor removed)."""
        prune(self._root(), self._disk_max, folders=True)

    def latest(self, match: Callable[[Hashable, Any], bool]) -> Hashable | None:
        """The key of the most recently used result in memory for which `match(key, result)` holds, or None: what
        another session of this server computed or read last (the Head examples page's fallback)."""
        with self._lock:
            kept = list(self._memory.items())
        return next((key for key, result in reversed(kept) if match(key, result)), None)

    def _remember(self, key: Hashable, result) -> None:
        with self._lock:
            self._memory[key] = result
            self._memory.move_to_end(key)
            while len(self._memory) > self._memory_max:
                self._memory.popitem(last=False)

    # -- jobs under way ----------------------------------------------------------------------------
    def obtain(self, key: Hashable, compute: Callable[[], Any], *, tick: Callable[[], None] = lambda: None,
               interval: float = 0.5):
        """The result for `key`: kept already, or from the same job under way elsewhere (waited
        for, with `tick()` every `interval` seconds: a caller that must stop raises there), or
        from `compute()` here, then kept (None from `compute`: nothing to keep, returned as is).
        When the job waited for ends without a result, this caller computes it."""
        kept = self.get(key)
        if kept is not None:
            return kept
        while (running := self.lead(key)) is not None:
            while not running.wait(interval):
                tick()
            theirs = self.get(key)
            if theirs is not None:
                return theirs
        try:
            result = compute()
            if result is not None:
                self.put(key, result)
            return result
        finally:
            self.done(key)

    def lead(self, key: Hashable) -> threading.Event | None:
        """None when the caller is the first to compute `key` (it must call `done(key)` when it
        stops, with a result or not); else the Event that `done` of the job under way sets: wait
        for it, then `get(key)` (None if that job failed or was cancelled: then lead again)."""
        with self._lock:
            running = self._running.get(key)
            if running is None:
                self._running[key] = threading.Event()
            return running

    def done(self, key: Hashable) -> None:
        with self._lock:
            running = self._running.pop(key, None)
        if running is not None:
            running.set()


@functools.cache
def statistics_store() -> ResultStore:
    """The store of corpus statistics shared by every session of this process, on disk under
    `cache_root()/corpus` ($MHA_VIZ_CACHE_DIR, read at each use); `statistics_store.cache_clear()`
    forgets what it holds in memory (a restart)."""
    return ResultStore(lambda: cache_root() / "corpus", CACHE_VERSION, save=lambda stats, folder: stats.save(folder),
                       load=CorpusStats.load)
