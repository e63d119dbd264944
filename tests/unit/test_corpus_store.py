"""The corpus results store (mha_viz.corpus.store): results round-trip through memory and disk,
a broken folder counts as missing, the disk keeps the most recently used, and identical jobs
asked for at once run once (a failed or cancelled one lets the next caller compute)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from mha_viz.corpus.store import ResultStore
from mha_viz_models.cache_folder import STALE_TMP_S, TMP_PREFIX
from tests.waiting import wait_until


def _store(root, **kw) -> ResultStore:
    def save(result, folder):
        (folder / "r.json").write_text(json.dumps(result))

    def load(folder):
        return json.loads((folder / "r.json").read_text())

    return ResultStore(lambda: root, 1, save=save, load=load, **kw)


def test_memory_then_disk_and_a_broken_folder_is_missing(tmp_path):
    store = _store(tmp_path)
    store.put("a", {"x": 1})
    assert store.get("a") == {"x": 1}
    again = _store(tmp_path)  # a restarted server: read back from disk
    assert again.get("a") == {"x": 1}
    assert _store(tmp_path).folder("a") == store.folder("a") != ResultStore(
        lambda: tmp_path, 2, save=None, load=None).folder("a")  # the version is part of the key
    (store.folder("a") / "r.json").write_text("{broken")
    assert _store(tmp_path).get("a") is None and not store.folder("a").exists()
    assert _store(tmp_path).get("never") is None


def test_memory_keeps_the_last_few(tmp_path):
    store = _store(tmp_path / "none", memory=2)
    (tmp_path / "none").write_text("not a folder")  # the disk cannot be written: memory still works
    for key in "abc":
        store.put(key, key)
    assert store.get("a") is None and store.get("b") == "b" and store.get("c") == "c"


def test_the_latest_match_is_the_most_recently_used(tmp_path):
    store = _store(tmp_path)
    for key, result in (("a1", 1), ("b1", 2), ("a2", 3)):
        store.put(key, result)
    assert store.latest(lambda key, _: key.startswith("a")) == "a2"
    assert store.get("a1") == 1 and store.latest(lambda key, _: key.startswith("a")) == "a1"  # a read is a use
    assert store.latest(lambda _, result: result == 2) == "b1"
    assert store.latest(lambda key, _: key.startswith("c")) is None


def test_the_disk_keeps_the_most_recently_used(tmp_path):
    store = _store(tmp_path, memory=1, disk=3)
    for i, key in enumerate("abc"):
        store.put(key, key)
        os.utime(store.folder(key), (1000 + i, 1000 + i))  # written long ago, a first
    assert store.get("a") == "a"  # read from disk (only c is in memory): a is now the most recent
    store.put("d", "d")  # four on disk: the least recently used (b) goes
    assert {p.name for p in tmp_path.iterdir()} == {store.folder(k).name for k in "acd"}
    stale = tmp_path / f"{TMP_PREFIX}dead"
    fresh = tmp_path / f"{TMP_PREFIX}writing"
    stale.mkdir()
    fresh.mkdir()
    os.utime(stale, (time.time() - STALE_TMP_S - 10,) * 2)
    store.prune()
    assert not stale.exists() and fresh.exists()


def test_identical_jobs_at_once_run_once(tmp_path):
    store = _store(tmp_path)
    runs, results = [], []
    gate = threading.Event()

    def compute():
        runs.append(1)
        gate.wait(5)
        return {"sum": 42}

    waiting = set()  # the threads seen waiting for the job under way (obtain's tick)

    def tick():
        waiting.add(threading.get_ident())

    threads = [threading.Thread(target=lambda: results.append(store.obtain("job", compute, tick=tick,
                                                                           interval=0.01)))
               for _ in range(6)]
    for t in threads:
        t.start()
    # the job ends only once the 5 others are all waiting for it (not merely started)
    assert wait_until(lambda: len(waiting) == 5, 30), f"{len(waiting)} of 5 threads waited for the job"
    gate.set()
    for t in threads:
        t.join(5)
    assert len(runs) == 1 and results == [{"sum": 42}] * 6
    assert store.obtain("job", lambda: pytest.fail("computed again")) == {"sum": 42}


def test_a_failed_or_cancelled_job_lets_the_next_caller_compute(tmp_path):
    store = _store(tmp_path)
    assert store.obtain("k", lambda: None) is None  # failed (the caller showed why): nothing kept
    assert store.lead("k") is None  # nothing left under way
    store.done("k")

    class Stop(BaseException):  # as Streamlit stops a run
        pass

    started, waited, ticks = threading.Event(), threading.Event(), []

    def cancelled():
        started.set()
        assert waited.wait(30)  # stopped only once the second caller is waiting for this job
        raise Stop

    def first():
        with pytest.raises(Stop):
            store.obtain("k", cancelled)

    leader = threading.Thread(target=first)
    leader.start()
    started.wait(5)
    got = store.obtain("k", lambda: "mine", tick=lambda: ticks.append(1) or waited.set(), interval=0.01)
    leader.join(5)
    assert got == "mine" and ticks  # it waited for the leader, then computed itself
    assert store.get("k") == "mine"


def test_a_folder_pruned_by_another_process_while_it_is_read_counts_as_missing(tmp_path):
    """The statistics' head examples are an optional file: a result read while another process pruned its folder
    could come back without them. What was read while the folder went is not kept: missing, computed again."""
    from mha_viz_models.cache_folder import remove

    def save(result, folder):
        (folder / "r.json").write_text(json.dumps(result))
        (folder / "optional.json").write_text(json.dumps("examples"))

    def load(folder):
        result = json.loads((folder / "r.json").read_text())
        remove(folder)  # another process prunes it here
        extra = folder / "optional.json"
        return {**result, "extra": json.loads(extra.read_text()) if extra.exists() else None}

    ResultStore(lambda: tmp_path, 1, save=save, load=None).put("a", {"x": 1})
    store = ResultStore(lambda: tmp_path, 1, save=save, load=load)
    assert store.get("a") is None and store.get("a") is None  # nothing half read was kept in memory either
