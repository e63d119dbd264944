"""What the compiled loops share (mha_viz/compiled.py): their cache folder follows every
source they are built from, a loop started on one of the pool's own threads runs there instead
of waiting on the pool, and a head with NaN in it gets no statistics rather than made-up ones."""

from __future__ import annotations

import threading

import numpy as np

from mha_viz import compiled, metrics
from mha_viz.capture.run import AttentionRun
from mha_viz.metrics import head_stats


def test_the_cache_folder_is_named_by_every_kernel_source(monkeypatch, tmp_path):
    """Numba re-checks only a loop's own file: editing log32 in compiled.py must move the cache."""
    before = compiled.source_hash()
    real = compiled.Path.read_bytes

    def edited(path):
        data = real(path)
        return data + b"\n# edited" if path.name == "compiled.py" else data

    monkeypatch.setattr(compiled.Path, "read_bytes", edited)
    assert compiled.source_hash() != before
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert compiled.cache_folder() == tmp_path / compiled.source_hash()
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocked))  # cannot be written: no cache at all
    assert compiled.cache_folder() is None


def test_a_loop_started_on_a_pool_thread_runs_there():
    """Every pool worker computing a metric at once (each would wait on the pool) still finishes."""
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 40, 40)).astype(np.float32)
    run = AttentionRun(tokens=[f"t{i}" for i in range(40)], attentions=a / a.sum(-1, keepdims=True))
    want = metrics.head_similarity(run, "js")
    jobs = [compiled.POOL.submit(metrics.head_similarity, run, "js") for _ in range(compiled.WORKERS)]
    done = threading.Event()
    threading.Thread(target=lambda: ([j.result() for j in jobs], done.set()), daemon=True).start()
    assert done.wait(30), "the pool deadlocked"
    for job in jobs:
        np.testing.assert_array_equal(job.result(), want)


def test_a_head_with_nan_gets_no_statistics():
    rng = np.random.default_rng(1)
    a = rng.random((1, 3, 6, 6)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    a[0, 1, 2, 3] = np.nan
    run = AttentionRun(tokens=list("abcdef"), attentions=a)
    for compiled_pass in (True, False):
        stats = head_stats.pattern_stats(run, compiled=compiled_pass)
        assert np.isnan(stats["entropy"][0, 1]) and np.isnan(stats["confidence"][0, 1]), compiled_pass
        assert np.isfinite(stats["entropy"][0, [0, 2]]).all()
