"""The corpus job on Ray: `run` gives what the local engine gives (`CorpusStats`), from per-batch
`Partial` sums computed by actors that stay alive across jobs, merged on the driver.

Imported only when `engine="ray"` is chosen (`engine.head_statistics`): nothing the app imports
at start imports Ray.

What runs where:

- the driver cuts the documents into batches (`batching.plan`: neighbours of similar length, so
  that batches pad little) and hands each batch to the actor with the fewest calls waiting, at
  most `IN_FLIGHT` per actor (one running, one queued, so an actor never waits for the driver);
- each actor (`ray_engine_pool.HeadSums`) has loaded the model once, when the first job for it
  created the pool, and turns a batch into its `accumulate.batch_partial`, or returns the user's
  error (ModelLoadError, InputError), which the driver raises as it is;
- the driver merges the partials as they come back (`ray.wait`) and reports progress; while
  none comes back (actors starting, or busy with another session's job) it calls `progress`
  every `HEARTBEAT_S` with the same counts, so that Cancel works, and gives up after
  `ACTOR_WAIT_S` (a pool the cluster cannot place fails instead of waiting forever). A stopped
  job cancels its queued calls; the pool stays for the next job.

The actors are kept for the next job (`ray_engine_pool`: one model's pool at a time; a job for
another model replaces it), so a job after the first starts in a fraction of a second instead of
the seconds an actor takes to import torch and transformers and load the model.

The cluster: with `RAY_ADDRESS` set, the job joins that cluster (its nodes need mha-viz's
requirements and the models; this checkout's `mha_viz` and `models` packages are shipped to
them as `py_modules`) and never shuts it down. Otherwise it starts a local one sized to the CPUs
this process may use (`os.sched_getaffinity`: a container's share, not the host's count),
`ray.init(num_cpus=…, include_dashboard=False)` with no plain worker started ahead (no actor could take
it), under a lock (two sessions choosing Ray at once start one cluster), and keeps it for the rest of the
process (the next job saves the start, about 5 s). `shutdown()` kills the actors and stops a cluster this module
started; it runs at exit too (the tests call it sooner). A Ray session someone else started in this
process is used as it is and left running.

CPU accounting, and why the pool leaves one CPU free. Ray schedules by logical CPUs. A pool that
reserves every CPU leaves none to Ray's tasks, and on a 2-core machine a job that needs one
hangs; nor could a new model's pool start beside one that is retiring. So the actors together
reserve at most `cpus - SPARE_CPUS`: on 2 cores, one actor with `num_cpus=1`. Ray then sets that
actor's OMP_NUM_THREADS to 1, which would halve torch's speed next to the local engine; the
actor sets torch's threads back to its share of the machine's cores (`threads`, 2 on 2 cores).
With GPUs, one actor per GPU (`num_gpus=1`, `num_cpus=1`), as many as the CPUs allow.
The cluster's workers start with GOMP_SPINCOUNT=10000 and NumPy's arrays on ordinary pages (`settings.process_env`,
in the job's runtime env, unless the user set them): an actor's waiting threads would otherwise spin through the cores
the app's server computes on, and the server's through the actor's (both 5 × slower on 2 cores,
benchmarks/openmp_spin.py).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from pathlib import Path

import ray  # heavy, optional (requirements-ray.txt): this module is imported only for engine="ray"
import torch

import mha_viz_models
from mha_viz import settings
from mha_viz.budget.time_left import TimeLeft
from mha_viz.corpus import ray_engine_pool
from mha_viz.corpus.accumulate import Partial
from mha_viz.corpus.batching import plan_indexed, work
from mha_viz.corpus.inputs import corpus_hash, read_texts
from mha_viz.corpus.ray_engine_pool import HeadSums, Pool
from mha_viz.corpus.stats import CorpusStats
from mha_viz.progress import Counted
from mha_viz.text.wording import plural
from mha_viz_models import LoadedModel, ModelLoadError

__all__ = ["HeadSums", "Pool", "actors", "connect", "plan_pool", "run", "shutdown"]
log = logging.getLogger("mha_viz.corpus")

SPARE_CPUS = 1  # left to Ray's tasks and to a new pool beside a retiring one (see the module doc)
THREADS_PER_ACTOR = 4  # torch threads per CPU actor: small batches scale poorly beyond
IN_FLIGHT = 2  # calls given to one actor at a time: one running, one waiting its turn
HEARTBEAT_S = 0.5  # while no batch comes back, `progress` is still called this often (Cancel)
ACTOR_WAIT_S = 600  # seconds without a batch back before the job fails (a pool Ray cannot place)
_started = False  # whether this module started the Ray session it is using
_init_lock = threading.Lock()  # Streamlit sessions are threads: one ray.init at a time


def plan_pool(cpus: int, gpus: int, *, local: bool, node_cpus: int | None = None) -> Pool:
    """The actor pool for a cluster of `cpus` logical CPUs and `gpus` GPUs (module doc). `local`:
    the cluster is this machine, whose `cpus` cores the actors may use as threads. `node_cpus`:
    the most CPUs one node has (an actor must fit on one node, or Ray waits for it forever)."""
    free = max(1, cpus - SPARE_CPUS)
    if gpus >= 1:
        return Pool(actors=max(1, min(gpus, free)), num_cpus=1, num_gpus=1, threads=1)
    actors = max(1, free // THREADS_PER_ACTOR)
    num_cpus = max(1, free // actors)
    if node_cpus is not None and num_cpus > node_cpus:
        num_cpus = max(1, node_cpus - (SPARE_CPUS if node_cpus > SPARE_CPUS else 0))
        actors = max(1, free // num_cpus)
    threads = max(1, min(THREADS_PER_ACTOR, cpus // actors)) if local else num_cpus
    return Pool(actors=actors, num_cpus=num_cpus, num_gpus=0, threads=threads)


def connect() -> Pool:
    """Join the cluster at RAY_ADDRESS, or start (or reuse) a local one; its actor pool."""
    with _init_lock:
        if not ray.is_initialized():
            _init()
    res = ray.cluster_resources()
    nodes = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
    return plan_pool(int(res.get("CPU", 1)), int(res.get("GPU", 0)), local=_started,
                     node_cpus=max(nodes) if nodes else None)


def _init() -> None:
    global _started
    address = os.environ.get("RAY_ADDRESS")
    tuned = settings.process_env(os.environ)  # the actors share cores with this process, or with one another
    if address:
        code = [str(Path(mha_viz_models.__file__).parent), str(Path(__file__).parents[1])]  # models/, mha_viz/
        ray.init(address=address, log_to_driver=False, runtime_env={"py_modules": code, "env_vars": tuned})
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a local run reports nothing
        # Ray starts its workers at nice 15: on a busy machine the actor would get the CPU last,
        # behind the local engine it stands in for (6 × slower measured on a shared 2-core box)
        os.environ.setdefault("RAY_worker_niceness", "0")
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        # no worker started ahead for the driver: it would be a plain one, and every actor of the pool runs in the
        # cluster's runtime env, so none could take it (an idle process of 79 MB for the cluster's life, measured)
        ray.init(address="local", num_cpus=settings.machine_cpus(), num_gpus=gpus, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.ERROR,  # the caller reports progress
                 runtime_env={"env_vars": tuned}, _system_config={"prestart_worker_first_driver": False})
        _started = True
    atexit.unregister(shutdown)  # once, however often the cluster is restarted
    atexit.register(shutdown)  # after ray.init's own hook, so it runs before it: actors first


def shutdown() -> None:
    """Kill the actors this module keeps and stop the local Ray cluster it started (a joined one,
    or a session someone else started, is left running). Runs at exit."""
    global _started
    ray_engine_pool.close()
    if _started and ray.is_initialized():
        ray.shutdown()
    _started = False


def actors() -> list[dict]:
    """The actors kept for the next job, one dict each (`actor` id, `pid`, `model`, `loads`: the
    models its process has loaded); [] when none are."""
    return ray_engine_pool.current()


def run(model, texts, *, batch_size: int = 16, max_tokens: int | None = 128, importance: bool = True,
        progress: Counted | None = None, examples=None) -> CorpusStats:
    """`engine.head_statistics` on Ray: the same arguments and result (`progress`: `engine.documents`').
    `model`: a registry name, hub id or folder (a `LoadedModel` stands for the name it was loaded by, with or
    without our MHA: each actor loads its own). Raises CorpusError, ModelLoadError or InputError as the local
    engine does (not wrapped in Ray's exceptions); Cancelled when `progress` raises it."""
    spec = model.name if isinstance(model, LoadedModel) else str(model)
    local = model.local_attention if isinstance(model, LoadedModel) else False  # "our MHA" follows
    docs = read_texts(texts)
    start = time.perf_counter()
    pool = connect()
    with ray_engine_pool.borrow(spec, local, pool) as kept:
        try:
            batches = list(plan_indexed(docs, batch_size))
            left = TimeLeft(sum(work([t for _, t in batch], max_tokens) for batch in batches))
            merged = _stream(kept.handles, batches, len(docs), start, progress, left, max_tokens=max_tokens,
                             importance=importance, examples=examples)
        except (ModelLoadError, ray.exceptions.RayError, TimeoutError):
            ray_engine_pool.retire(kept)  # actors without the model, or lost: the next job starts anew
            raise
    return merged.finish(corpus_hash=corpus_hash(docs), max_tokens=max_tokens,
                         seconds=time.perf_counter() - start)


def _stream(handles: list, batches, total: int, start: float, progress: Counted | None, left: TimeLeft, *,
            max_tokens: int | None, importance: bool, examples=None) -> Partial:
    """The batches through the actors, at most IN_FLIGHT each; their partials merged. `left`: the time left,
    stepped by each batch's work as it comes back (the first, with the actors' start, is not timed)."""
    waiting = iter(batches)
    busy = [0] * len(handles)  # this job's calls in flight, per actor
    pending = {}  # ObjectRef -> (actor index, documents)
    merged, done, last = None, 0, time.perf_counter()
    try:
        while True:
            while min(busy) < IN_FLIGHT and (batch := next(waiting, None)) is not None:
                i = busy.index(min(busy))
                pending[handles[i].partial.remote([t for _, t in batch], max_tokens, importance, examples,
                                                  [d for d, _ in batch])] = (i, batch)
                busy[i] += 1
            if not pending:
                return merged
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=HEARTBEAT_S)
            if ready:
                i, batch = pending.pop(ready[0])
                busy[i] -= 1
                part = ray.get(ready[0])
                if isinstance(part, Exception):  # the user's error, raised in an actor
                    raise part
                merged = part if merged is None else merged.merge(part)
                done, last = done + len(batch), time.perf_counter()
                left.step(work([t for _, t in batch], max_tokens))
            elif time.perf_counter() - last > ACTOR_WAIT_S:
                raise TimeoutError(f"no batch came back from Ray in {ACTOR_WAIT_S} s: can the cluster place "
                                   f"{plural(len(handles), 'actor')} with the CPUs / GPUs this job asks for?")
            if progress is not None:
                progress(done, total, time.perf_counter() - start, left.seconds())
    finally:
        for ref in pending:  # a stopped job's queued calls do not run (a running one finishes)
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - e.g. its actor just died: the job's own error is what counts
                log.debug("could not cancel a Ray call", exc_info=True)
