"""The corpus job on Ray Data: `run` gives what the local engine gives (`CorpusStats`), from
per-batch `Partial` sums computed by a pool of actors and merged on the driver.

Imported only when `engine="ray"` is chosen (`engine.head_statistics`): nothing the app imports
at start imports Ray.

What runs where:

- the driver puts the documents into a Dataset (`ray.data.from_items`, one row a document, in the
  order `batching.plan` gives, so that neighbours have similar lengths and batches pad little);
- `map_batches` runs `HeadSums`, a callable class, on a fixed-size actor pool: each actor loads
  the model once in `__init__` (registry name, hub id or folder, with `mha_viz.load_model`) and
  turns each batch of `batch_size` documents into its `accumulate.batch_partial`, pickled into a
  one-row batch (`partial`, `n_docs`), or the user's error (ModelLoadError, InputError) pickled
  in its place, which the driver raises as it is;
- the driver merges the partials as they stream back (`iter_batches`) and reports progress.

The cluster: with `RAY_ADDRESS` set, the job joins that cluster (its nodes need mha-viz's
requirements and the models; this checkout's `mha_viz` and `models` packages are shipped to
them as `py_modules`) and never shuts it down. Otherwise it starts a local one sized to the CPUs
this process may use (`os.sched_getaffinity`: a container's share, not the host's count),
`ray.init(num_cpus=…, include_dashboard=False)`, under a lock (two sessions choosing Ray at
once start one cluster), and keeps it for the rest of the process (the next run saves the start, about 5 s); Ray stops it when the process
exits, and `shutdown()` stops it sooner (the tests call it). A Ray session someone else started
in this process is used as it is and left alone.

CPU accounting, and why the pool leaves one CPU free. Ray schedules by logical CPUs. Ray Data's
own tasks (reading and splitting blocks, here the `from_items` input) need a CPU each; an actor
pool that reserves every CPU leaves them none, and on a 2-core machine the job hangs with the
actors waiting for input that is never read. So the actors together reserve at most
`cpus - SPARE_CPUS`: on 2 cores, one actor with `num_cpus=1`. Ray then sets that actor's
OMP_NUM_THREADS to 1, which would halve torch's speed next to the local engine; the actor sets
torch's threads back to its share of the machine's cores (`threads`, 2 on 2 cores), since the
spare CPU is busy only for the moments a block is read. With GPUs, one actor per GPU
(`num_gpus=1`, `num_cpus=1`), as many as the CPUs allow.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import ray  # heavy, optional (requirements-ray.txt): this module is imported only for engine="ray"
import torch

import models
from models import LoadedModel, ModelLoadError

# Cancelled, model_weights: from the package face, as engine.py (which imports this module when
# engine="ray" is chosen) defines them
from ..capture import load_model
from ..tokenize import InputError
from .accumulate import Cancelled, batch_partial, model_weights
from .batching import plan
from .inputs import corpus_hash, read_texts
from .stats import CorpusStats

SPARE_CPUS = 1  # left to Ray Data's read and split tasks (see the module doc)
THREADS_PER_ACTOR = 4  # torch threads per CPU actor: small batches scale poorly beyond
ACTOR_WAIT_S = 600  # seconds Ray Data may wait for the actor pool to be placed (loading a large model)
MAX_BLOCKS = 200  # blocks of the input Dataset: more means more scheduling for nothing
Progress = Callable[[int, int, float, float], "bool | None"]  # engine.Progress: done, total, docs/s, ETA s
_started = False  # whether this module started the Ray session it is using
_init_lock = threading.Lock()  # Streamlit sessions are threads: one ray.init at a time


def machine_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's cpuset), else the count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Pool:
    """How many actors, and what each reserves from Ray and uses."""

    actors: int
    num_cpus: int  # logical CPUs reserved per actor
    num_gpus: int
    threads: int  # torch threads per actor


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
    if address:
        code = [str(Path(models.__file__).parent), str(Path(__file__).parents[1])]  # models/, mha_viz/
        ray.init(address=address, log_to_driver=False, runtime_env={"py_modules": code})
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a local run reports nothing
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        ray.init(address="local", num_cpus=machine_cpus(), num_gpus=gpus, include_dashboard=False,
                 log_to_driver=False, logging_level=logging.ERROR)  # the caller reports progress
        _started = True


def shutdown() -> None:
    """Stop the local Ray cluster this module started (a joined one is left running)."""
    global _started
    if _started and ray.is_initialized():
        ray.shutdown()
    _started = False


class HeadSums:
    """One actor: one model, loaded once; each batch of documents -> its pickled `Partial`, or the
    user's error (ModelLoadError, InputError) pickled in its place: Ray would report an actor
    that fails to start as ActorDiedError, with the message in its text only."""

    def __init__(self, model_spec: str, max_tokens: int | None, importance: bool, threads: int,
                 local_attention: bool = False) -> None:
        torch.set_num_threads(threads)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.max_tokens, self.importance = max_tokens, importance
        self.model, self.weights, self.error = None, None, None
        try:
            self.model = load_model(model_spec, device=device, local_attention=local_attention)
        except ModelLoadError as exc:
            self.error = exc
            return
        self.weights = model_weights(self.model)  # the output-norm columns, as the local engine

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        try:
            if self.error is not None:
                raise self.error
            out = batch_partial(self.model, texts, max_tokens=self.max_tokens, importance=self.importance,
                                weights=self.weights)
        except (ModelLoadError, InputError) as exc:
            out = exc
        return {"partial": np.array([pickle.dumps(out)], dtype=object), "n_docs": np.array([len(texts)])}


def run(model, texts, *, batch_size: int = 16, max_tokens: int | None = 128, importance: bool = True,
        progress: Progress | None = None) -> CorpusStats:
    """`engine.head_statistics` on Ray: the same arguments and result. `model`: a registry name,
    hub id or folder (a `LoadedModel` stands for the name it was loaded by, with or without our
    MHA: each actor loads its own). Raises CorpusError, ModelLoadError or InputError as the local engine does (not wrapped
    in Ray's exceptions); Cancelled when `progress` returns False."""
    spec = model.name if isinstance(model, LoadedModel) else str(model)
    local = model.local_attention if isinstance(model, LoadedModel) else False  # "our MHA" follows
    docs = read_texts(texts)
    start = time.perf_counter()
    pool = connect()
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the caller shows its own
    ctx.print_on_execution_start = False
    ctx.wait_for_min_actors_s = ACTOR_WAIT_S  # a pool the cluster cannot place fails, not waits forever
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # no "execution finished" lines
    ordered = [t for batch in plan(docs, batch_size) for t in batch]  # neighbours of similar length
    blocks = min(-(-len(ordered) // batch_size), MAX_BLOCKS)  # whole batches in a block, mostly
    ds = ray.data.from_items([{"text": t} for t in ordered], override_num_blocks=blocks)
    sums = ds.map_batches(
        HeadSums, batch_size=batch_size, batch_format="numpy",
        fn_constructor_kwargs={"model_spec": spec, "max_tokens": max_tokens,
                               "importance": importance, "threads": pool.threads, "local_attention": local},
        compute=ray.data.ActorPoolStrategy(size=pool.actors),
        num_cpus=pool.num_cpus, num_gpus=pool.num_gpus or None,
        max_restarts=0, max_task_retries=0,  # an actor lost (out of memory…) fails the job, not retried forever
    )
    total, done, merged = len(docs), 0, None
    for out in sums.iter_batches(batch_size=None, batch_format="numpy"):  # leaving it stops the job
        for blob, n in zip(out["partial"], out["n_docs"]):
            part = pickle.loads(blob)
            if isinstance(part, Exception):  # the user's error, raised in an actor
                raise part
            merged = part if merged is None else merged.merge(part)
            done += int(n)
        if progress is not None:
            rate = done / max(time.perf_counter() - start, 1e-9)
            if progress(done, total, rate, (total - done) / rate if rate else float("inf")) is False:
                raise Cancelled(done, total)
    return merged.finish(corpus_hash=corpus_hash(docs), max_tokens=max_tokens,
                         seconds=time.perf_counter() - start)
