"""The Ray engine's actors, kept across corpus jobs: each actor loads its model once, and every
job in this process for the same model (the app's sessions, a script's repeated jobs) borrows the
same actors, so that only the first job pays for starting processes and loading the model.

Imported only by `ray_engine` (named under its prefix, so the app's preload leaves it alone too).

One pool at a time, keyed by the model (registry name, hub id or folder), our MHA or not, and the
actor plan (`Pool`) of the Ray session it lives in. A job for another key retires the current pool
and starts a new one: a retired pool's actors are killed as soon as the last job using them ends
(never under a running job). One pool rather than one per model: each actor holds a model in
memory and reserves CPUs (or a GPU) from Ray, and the app explores one model at a time; a new
pool that the cluster cannot place beside a retiring one waits in Ray until that one ends.

Threads: `borrow` creates actors under a lock (two sessions asking at once get one pool; creating
an actor returns at once, the model loads in the actor). Jobs on one pool from two threads are
safe: an actor runs one call at a time, and each job waits only for its own calls' results.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import ray  # heavy, optional (requirements-ray.txt): this module is imported only for engine="ray"
import torch

from mha_viz.corpus.accumulate import Partial, batch_partial, model_weights
from mha_viz.text.tokenize import InputError
from mha_viz_models import ModelLoadError
from mha_viz_models.loading.loader import load_model

_loads = 0  # models loaded in this process: 1 in an actor that was reused, whatever the jobs


@dataclass(frozen=True)
class Pool:
    """How many actors, and what each reserves from Ray and uses (`ray_engine.plan_pool`)."""

    actors: int
    num_cpus: int  # logical CPUs reserved per actor
    num_gpus: int
    threads: int  # torch threads per actor


class HeadSums:
    """One actor: one model, loaded once; each batch of documents -> its `Partial`, or the user's
    error (ModelLoadError, InputError) returned in its place: raised in an actor, Ray would wrap
    it (and an actor whose model fails to load would die, its message in ActorDiedError's text)."""

    def __init__(self, model_spec: str, threads: int, local_attention: bool = False) -> None:
        global _loads
        torch.set_num_threads(threads)  # Ray sets OMP_NUM_THREADS to the actor's CPUs (ray_engine doc)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model, self.weights, self.error = None, None, None
        try:
            self.model = load_model(model_spec, device=device, local_attention=local_attention)
        except ModelLoadError as exc:
            self.error = exc
            return
        _loads += 1
        self.weights = model_weights(self.model)  # the output-norm columns, as the local engine

    def partial(self, texts: Sequence[str], max_tokens: int | None, importance: bool, examples=None,
                docs: Sequence[int] | None = None) -> Partial | Exception:
        """One batch's sums (`accumulate.batch_partial`; with `examples`, each head's examples of
        documents `docs`), or the user's error."""
        try:
            if self.error is not None:
                raise self.error
            return batch_partial(self.model, list(texts), max_tokens=max_tokens, importance=importance,
                                 weights=self.weights, examples=examples, docs=docs)
        except (ModelLoadError, InputError) as exc:
            return exc

    def info(self) -> dict:
        """Who this actor is: its process, model and how many models that process has loaded."""
        return {"actor": ray.get_runtime_context().get_actor_id(), "pid": os.getpid(),
                "model": self.model.name if self.model else None, "loads": _loads}


@dataclass
class Actors:
    """One model's live actors and the jobs using them."""

    key: tuple  # (model spec, our MHA, Pool, Ray job id)
    handles: list  # ray ActorHandle, one per actor
    users: int = 0
    retired: bool = False

    def kill(self) -> None:
        for handle in self.handles:
            try:
                ray.kill(handle)
            except Exception:  # noqa: BLE001 - already gone with its Ray session
                pass
        self.handles = []


_lock = threading.Lock()  # Streamlit sessions are threads: one pool created, borrowed, retired at a time
_current: Actors | None = None
_retired: list[Actors] = []  # retired pools still used by a running job
_exit_hook = False


def _session() -> str:
    return ray.get_runtime_context().get_job_id()


def _create(spec: str, local_attention: bool, plan: Pool, key: tuple) -> Actors:
    global _exit_hook
    if not _exit_hook:  # registered after ray.init's own, so it runs first at exit
        atexit.register(close)
        _exit_hook = True
    remote = ray.remote(HeadSums).options(
        num_cpus=plan.num_cpus, num_gpus=plan.num_gpus or None,
        max_restarts=0, max_task_retries=0)  # an actor lost (out of memory…) fails the job, not retried forever
    handles = [remote.remote(spec, plan.threads, local_attention) for _ in range(plan.actors)]
    return Actors(key=key, handles=handles)


@contextmanager
def borrow(spec: str, local_attention: bool, plan: Pool) -> Iterator[Actors]:
    """The pool for this model (the current one, or a new one replacing it) for one job."""
    global _current
    key = (spec, bool(local_attention), plan, _session())
    with _lock:
        if _current is not None and _current.key != key:
            _retire(_current)
        if _current is None:
            _current = _create(spec, local_attention, plan, key)
        actors = _current
        actors.users += 1
    try:
        yield actors
    finally:
        with _lock:
            actors.users -= 1
            if actors.retired and actors.users == 0:
                actors.kill()
                if actors in _retired:
                    _retired.remove(actors)


def retire(actors: Actors) -> None:
    """Give up on these actors (their model failed to load, one died): the next job gets new ones."""
    with _lock:
        _retire(actors)


def _retire(actors: Actors) -> None:
    global _current
    if _current is actors:
        _current = None
    if actors.retired:
        return
    actors.retired = True
    if actors.users == 0:
        actors.kill()
    else:
        _retired.append(actors)


def current() -> list[dict]:
    """The current pool's actors, one dict each: `actor` (Ray's actor id), `pid`, `model` and
    `loads` (models its process has loaded); [] when there is none."""
    with _lock:
        actors = _current
    if actors is None:
        return []
    return ray.get([h.info.remote() for h in actors.handles])


def close() -> None:
    """Kill every actor of this module's pools (at exit, and before its Ray session stops)."""
    global _current
    with _lock:
        pools = ([_current] if _current is not None else []) + _retired
        _current = None
        _retired.clear()
    if ray.is_initialized():
        for actors in pools:
            actors.kill()
