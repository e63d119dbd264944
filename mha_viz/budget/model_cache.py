"""A process-wide cache of loaded models: each (model, device, implementation) loads once.

The app keeps one `ModelCache` for all sessions (through `st.cache_resource`); concurrent
requests for the same model wait for the first load instead of loading it again.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Callable

import torch

import mha_viz_models
from mha_viz.budget import heap
from mha_viz_models import LoadedModel

Key = tuple[str, str, bool, str]  # spec, device, our MHA, precision asked for
log = logging.getLogger("mha_viz.budget.model_cache")


def _memory_of(model: object) -> list[weakref.ref] | None:
    """Weak references to `model` and to every tensor of its network (where its memory is); None where `model` cannot
    be referenced weakly."""
    try:
        refs = [weakref.ref(model)]
    except TypeError:
        return None
    network = getattr(model, "hf_model", None)
    if isinstance(network, torch.nn.Module):
        refs += [weakref.ref(t) for t in (*network.parameters(), *network.buffers())]
    return refs


class ModelCache:
    def __init__(self, loader: Callable[..., LoadedModel] = mha_viz_models.load, max_models: int = 3,
                 allow_pickle: bool = False) -> None:
        self._loader = loader
        self._allow_pickle = allow_pickle
        self._max = max_models
        self._models: dict[Key, LoadedModel] = {}
        self._locks: dict[Key, threading.Lock] = {}
        self._guard = threading.Lock()

    def __contains__(self, key: Key) -> bool:
        return key in self._models

    def __len__(self) -> int:
        """The models loaded (a model asked for as "auto" and by the precision it chose is one model, two keys)."""
        return len({id(m) for m in self._models.values()})

    def _keys_of(self, model: LoadedModel) -> list[tuple]:
        """Every key `model` is kept under (called under _guard)."""
        return [k for k, m in self._models.items() if m is model]

    def _touch(self, model: LoadedModel) -> None:
        """Make `model` the most recently used: every key of it last (called under _guard)."""
        for k in self._keys_of(model):
            self._models[k] = self._models.pop(k)

    def _evict(self) -> list[weakref.ref] | None:
        """Unload the least recently used models, every key of each, until at most max_models are left: weak
        references to what they held ([] where none went, None where one cannot be referenced weakly). Called under
        _guard."""
        held: list[weakref.ref] | None = []
        while len(self) > self._max:
            model = next(iter(self._models.values()))
            for k in self._keys_of(model):
                del self._models[k]
            parts = _memory_of(model)
            held = None if held is None or parts is None else held + parts
        return held

    def get(self, spec: str, device: str = "auto", local_attention: bool = False, *, dtype: str = "auto",
            progress=None) -> LoadedModel:
        key = (spec.strip(), device, bool(local_attention), dtype)
        with self._guard:
            if key in self._models:
                self._touch(self._models[key])  # most recently used last
                return self._models[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._models:  # loaded by another session while this one waited
                return self._models[key]
            start = time.perf_counter()
            with heap.paused():  # its objects by the hundred thousand: settled once, below
                model = self._loader(key[0], device=device, local_attention=local_attention, progress=progress,
                                     allow_pickle=self._allow_pickle, dtype=dtype)
            log.info("model loaded: %s (device %s, our MHA %s, %s) in %.1f s", key[0], device, key[2],
                     getattr(model, "precision", dtype), time.perf_counter() - start)
            with self._guard:
                self._models[key] = model
                # "auto" resolved to a precision: asking for that one by name is the same model, not a second load
                named = (*key[:3], getattr(model, "precision", dtype))
                self._models.setdefault(named, model)
                evicted = self._evict()  # free the least recently used model
            # the model lives in the cache: its objects left out of the collection after every run (`heap`); one
            # that left the cache has its objects handed back to the collector, where a cycle still holds them
            if evicted is None or evicted:
                heap.release(evicted)
            else:
                heap.settle()
            return model
