"""The Ray engine (mha_viz.corpus.ray_engine) on a local 2-CPU Ray cluster: the same statistics as
the local engine, progress as batches come back, the user's errors unwrapped from Ray's, an
actor pool that leaves a CPU spare, actors kept across jobs (and replaced for another model),
shut down cleanly, and no Ray imported by the app's modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from mha_viz import ModelLoadError, corpus, settings
from tests.helpers import ROOT, assert_corpus_patterns, assert_examples_match, corpus_voters, encoder_rows
from tests.waiting import wait_until

DOCS = corpus.read_texts("sample")[:20]
OPTIONS = {"batch_size": 8, "max_tokens": 32}
FAST = {**OPTIONS, "importance": False}


def assert_same_stats(remote, local, model, texts) -> None:
    """The same statistics; the classes each the majority of `texts`' own (`model` running each alone), up
    to documents within a padded batch's rounding (1e-5) of a rule's threshold: batches of other sizes, or
    other threads, may round them apart."""
    assert remote.n_docs == local.n_docs and remote.n_tokens == local.n_tokens
    numeric = [c for c in local.table.columns if c != "pattern"]
    np.testing.assert_allclose(remote.table[numeric].to_numpy(float), local.table[numeric].to_numpy(float),
                               rtol=1e-5, atol=1e-6)
    voters = corpus_voters(model, texts, OPTIONS["max_tokens"])
    for stats, where in ((remote, "ray"), (local, "local")):
        assert_corpus_patterns(stats.table["pattern"], voters, 1e-5, where)
    np.testing.assert_allclose(remote.similarity, local.similarity, rtol=1e-5, atol=1e-6)


def gone(pid: int, wait_s: float = 30.0) -> bool:
    """Whether process `pid` has ended (or is a zombie no one reaped), waiting up to `wait_s`."""
    def ended() -> bool:
        try:
            return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True

    return bool(wait_until(ended, wait_s, interval_s=0.2))


def titled_under_us(prefix: str) -> list[int]:
    """The processes below this one (children, theirs, …) whose title, as `ps` shows it, starts with `prefix`."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # ended meanwhile
                pass

    def below_us(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    found = []
    for pid in filter(below_us, parents):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith(prefix):
            found.append(pid)
    return found


@pytest.fixture(scope="module")
def ray_engine():
    """A local Ray cluster for this module, stopped at its end (and no cluster to join)."""
    mp = pytest.MonkeyPatch()
    mp.delenv("RAY_ADDRESS", raising=False)
    from mha_viz.corpus import ray_engine

    yield ray_engine
    ray_engine.shutdown()
    mp.undo()


@pytest.mark.model  # minilm, loaded by name in the actors
def test_ray_equals_local_and_reports_progress(ray_engine, minilm):
    """With the heads' importance (each head switched off over the documents: most of the time), on 10 documents:
    a full batch of 8 and a part of one."""
    docs = DOCS[:10]
    local = corpus.head_statistics("minilm", docs, engine="local", **OPTIONS)
    seen = []
    remote = corpus.head_statistics("minilm", docs, engine="ray", progress=lambda *a: seen.append(a), **OPTIONS)
    assert remote.n_docs == len(docs) and list(remote.table.columns) == list(local.table.columns)
    assert_same_stats(remote, local, minilm, docs)
    assert local.importance is not None
    np.testing.assert_allclose(remote.importance, local.importance, rtol=1e-5, atol=1e-6)
    assert remote.corpus_hash == local.corpus_hash
    fractions = [fraction for fraction, _ in seen]  # the package's one protocol: (fraction, message)
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert f"{len(docs)} of {len(docs)} documents" in seen[-1][1]


@pytest.mark.model  # minilm, loaded by name in the actors
def test_ray_keeps_the_same_head_examples_as_local(ray_engine, minilm):
    """Batches of 2 and of 3 round apart: each engine's examples against every document run alone, up to
    scores within a padded batch's rounding (1e-5) of a bin's edge or of each other; the masses alike."""
    import mha_viz

    local = corpus.head_examples("minilm", DOCS, engine="local", max_tokens=OPTIONS["max_tokens"], batch_size=2)
    remote = corpus.head_examples("minilm", DOCS, engine="ray", max_tokens=OPTIONS["max_tokens"], batch_size=3)
    rows = [encoder_rows(mha_viz.analyze(minilm, t, max_tokens=OPTIONS["max_tokens"]).attentions) for t in DOCS]
    for examples in (remote, local):
        assert_examples_match(examples, rows, 1e-5)
    a, b = remote.part, local.part
    np.testing.assert_allclose(a.distances, b.distances, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(a.key_ids, b.key_ids)
    np.testing.assert_allclose(a.key_mass, b.key_mass, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(a.query_mass, b.query_mass, rtol=1e-6, atol=1e-5)


@pytest.mark.model  # minilm, loaded by name in the actors
def test_a_model_that_does_not_load_is_a_model_load_error(ray_engine, tmp_path):
    with pytest.raises(ModelLoadError):
        corpus.head_statistics(str(tmp_path / "no-such-model"), DOCS[:2], engine="ray")


@pytest.mark.model  # minilm, loaded by name in the actors
def test_the_cluster_keeps_no_worker_that_no_actor_can_take(ray_engine):
    """Ray starts plain workers ahead for a new driver, but every actor of the pool runs in the cluster's runtime env
    (its OpenMP setting), so none could take one: a process idle for the cluster's life (79 MB). The local cluster
    starts none; after a job only the pool's actors are there."""
    corpus.head_statistics("minilm", DOCS[:8], engine="ray", **FAST)
    actors = {a["pid"] for a in ray_engine.actors()}
    assert actors and set(titled_under_us("ray::HeadSums")) >= actors
    assert titled_under_us("ray::IDLE") == []


@pytest.mark.model  # minilm, loaded by name in the actors
def test_cancel_stops_the_run_and_keeps_the_actors(ray_engine):
    corpus.head_statistics("minilm", DOCS[:8], engine="ray", **FAST)
    kept = ray_engine.actors()
    with pytest.raises(corpus.Cancelled):
        corpus.head_statistics("minilm", DOCS, engine="ray", progress=lambda *a: False, **FAST)
    assert ray_engine.actors() == kept
    assert corpus.head_statistics("minilm", DOCS, engine="ray", **FAST).n_docs == len(DOCS)


@pytest.mark.model  # minilm, loaded by name in the actors; then the random GPT-2's folder
def test_later_jobs_reuse_the_actors_and_another_model_gets_its_own(ray_engine, gpt2_dir, minilm, tiny_gpt2):
    corpus.head_statistics("minilm", DOCS[:8], engine="ray", **FAST)
    first = ray_engine.actors()
    remote = corpus.head_statistics("minilm", DOCS, engine="ray", **FAST)
    assert ray_engine.actors() == first  # the same actors, each having loaded the model once
    assert first and all(a["loads"] == 1 and a["model"] == remote.model_name for a in first)
    assert_same_stats(remote, corpus.head_statistics("minilm", DOCS, engine="local", **FAST), minilm, DOCS)

    other = corpus.head_statistics(str(gpt2_dir), DOCS, engine="ray", **FAST)
    now = ray_engine.actors()
    assert {a["actor"] for a in now}.isdisjoint(a["actor"] for a in first)
    assert all(a["model"] == other.model_name != remote.model_name for a in now)
    assert_same_stats(other, corpus.head_statistics(str(gpt2_dir), DOCS, engine="local", **FAST), tiny_gpt2, DOCS)
    assert all(gone(a["pid"]) for a in first)  # the replaced pool's actors were killed


@pytest.mark.model  # minilm, loaded by name in the actors
def test_two_jobs_at_once_share_one_pool(ray_engine, minilm):
    """Two app sessions (threads) starting Ray jobs at once: one pool, both results right."""
    corpus.head_statistics("minilm", DOCS[:8], engine="ray", **FAST)
    kept = ray_engine.actors()
    texts = [DOCS[:12], DOCS[8:]]
    results, errors = [None, None], []

    def one(i: int) -> None:
        try:
            results[i] = corpus.head_statistics("minilm", texts[i], engine="ray", **FAST)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and ray_engine.actors() == kept
    for i in range(2):
        assert_same_stats(results[i], corpus.head_statistics("minilm", texts[i], engine="local", **FAST), minilm,
                          texts[i])


@pytest.mark.model  # minilm, loaded by name in the actors
def test_shutdown_kills_the_actors_and_the_next_job_starts_again(ray_engine):
    import ray

    corpus.head_statistics("minilm", DOCS[:8], engine="ray", **FAST)
    pids = [a["pid"] for a in ray_engine.actors()]
    ray_engine.shutdown()
    assert not ray.is_initialized() and ray_engine.actors() == []
    assert pids and all(gone(p) for p in pids)
    assert corpus.head_statistics("minilm", DOCS[:8], engine="ray", **FAST).n_docs == 8


def started_with(pid: int) -> dict[str, str]:
    """The environment process `pid` started with (what OpenMP read when it loaded)."""
    started = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode(errors="replace").split("=", 1) for kv in started if b"=" in kv)


def test_a_process_that_ran_a_ray_job_exits_and_takes_its_actors_along(gpt2_dir):
    """A Ray job's process ends and its actors with it. Its actors started with GOMP_SPINCOUNT=10000
    (settings.OPENMP_SPIN, the cluster's runtime env): their PyTorch threads sleep soon when they wait, instead of
    spinning through the cores the app's server computes on (both 5 × slower, benchmarks/openmp_spin.py), and with
    NumPy's arrays on ordinary pages (settings.NO_HUGE_PAGES). OpenMP and NumPy read them once, as a process loads
    them: they are read from the environment the actor's process started with. The process here sets neither of its
    own (this suite's processes do: tests/conftest.py, the Makefile)."""
    code = ("import json; from mha_viz import corpus; from mha_viz.corpus import ray_engine\n"
            "from tests.models.test_corpus_ray import started_with\n"
            f"corpus.head_statistics({str(gpt2_dir)!r}, ['a b c', 'd e'], engine='ray', importance=False)\n"
            "print(json.dumps({a['pid']: [started_with(a['pid']).get(k) for k in ('GOMP_SPINCOUNT', "
            "'NUMPY_MADVISE_HUGEPAGE')] for a in ray_engine.actors()}))")
    mine = ("RAY_ADDRESS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "NUMPY_MADVISE_HUGEPAGE")
    env = {k: v for k, v in os.environ.items() if k not in mine}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr
    spins = json.loads(out.stdout.strip().splitlines()[-1])
    assert spins and {tuple(v) for v in spins.values()} == {("10000", "0")}, spins
    assert all(gone(int(p)) for p in spins)


@pytest.mark.parametrize("cpus, gpus, local, expected", [
    (2, 0, True, (1, 1, 0, 2)),  # 2 cores: one actor holding one CPU and using both cores
    (1, 0, True, (1, 1, 0, 1)),
    (16, 0, True, (3, 5, 0, 4)),
    (16, 0, False, (3, 5, 0, 5)),
    (8, 2, False, (2, 1, 1, 1)),  # one actor per GPU
])
def test_the_pool_leaves_a_cpu_spare(cpus, gpus, local, expected):
    from mha_viz.corpus.ray_engine import SPARE_CPUS, plan_pool

    pool = plan_pool(cpus, gpus, local=local)
    assert (pool.actors, pool.num_cpus, pool.num_gpus, pool.threads) == expected
    assert pool.actors * pool.num_cpus <= max(1, cpus - SPARE_CPUS)


def test_the_app_and_the_local_engine_do_not_import_ray():
    code = "import sys, mha_viz, mha_viz.corpus, mha_viz.ui; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_an_actor_never_asks_for_more_cpus_than_one_node_has(ray_engine):
    """4 nodes of 4 CPUs: 16 in all, but an actor of 5 CPUs would fit on none (Ray would wait for it
    forever)."""
    pool = ray_engine.plan_pool(16, 0, local=False, node_cpus=4)
    assert pool.num_cpus <= 4 and pool.actors * pool.num_cpus <= 16 - ray_engine.SPARE_CPUS


@pytest.mark.model
def test_an_actor_loads_the_model_as_the_session_did(ray_engine):
    """The app hands the Ray engine its loaded model: an actor loads it by the same name and with
    the same attention ("Compute with our MHA"), and computes what the session's model computes."""
    import torch

    import mha_viz
    from mha_viz.scan.torch_threads import process_count

    ours = mha_viz.load_model("minilm", device="cpu", local_attention=True)
    before = process_count()
    try:  # an actor's __init__ built here, in this process, sets its one torch thread on the process
        actor = ray_engine.HeadSums("minilm", 1, local_attention=True)
        assert actor.error is None and actor.model.local_attention and actor.model.name == ours.name
        plain = ray_engine.HeadSums("minilm", 1)
        assert not plain.model.local_attention
    finally:  # every later test of this process ran on one core
        torch.set_num_threads(before)
    assert process_count() == before


def test_a_local_cluster_is_sized_to_the_cpus_this_process_may_use(ray_engine):
    import ray

    assert settings.machine_cpus() == len(os.sched_getaffinity(0))
    ray_engine.connect()
    assert ray.cluster_resources()["CPU"] == len(os.sched_getaffinity(0))
