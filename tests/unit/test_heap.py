"""What the garbage collector walks (`mha_viz.budget.heap`): after `settle` what was alive is left out of every
collection (Streamlit's after each run walked SmolLM2's 200,000 objects: 0.1 s a click), what a cycle held
then is collected only after `release`; the model cache settles after each load and releases when a model
leaves it and a cycle still holds some of it."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
import torch

from mha_viz.budget import heap
from mha_viz.budget.model_cache import ModelCache


class Node:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _unfrozen():
    """Every frozen object back in the collector's view after each test (the process's other tests)."""
    yield
    gc.unfreeze()
    gc.collect()


def test_settled_objects_are_left_out_of_collections_until_released():
    kept = [Node() for _ in range(1000)]
    before = gc.get_freeze_count()
    heap.settle()
    assert gc.get_freeze_count() >= before + 1000  # the nodes, at least
    gone = weakref.ref(kept[0])
    del kept  # cyclic garbage now, but frozen: no collection walks it
    gc.collect()
    assert gone() is not None
    heap.release()
    assert gone() is None  # back in the collector's view, and collected
    assert gc.get_freeze_count() > 0  # what is still alive is frozen again


def test_the_model_cache_settles_after_a_load_and_releases_when_a_model_leaves(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "settle", lambda: calls.append("settle"))
    monkeypatch.setattr(heap, "release", lambda held=None: calls.append("release"))
    cache = ModelCache(loader=lambda spec, **_: object(), max_models=1)
    cache.get("a")
    assert calls == ["settle"]
    cache.get("a")  # already loaded: nothing to settle
    assert calls == ["settle"]
    cache.get("b")  # "a" leaves the cache
    assert calls == ["settle", "release"]


class Network(torch.nn.Module):
    """A model's network: its memory is its tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4))


class Model:
    """What the cache holds: a network, read by the model cache's weak references."""

    def __init__(self, cyclic: bool) -> None:
        self.hf_model = Network()
        if cyclic:  # a network that refers to its model, as a hook's closure may
            self.hf_model.owner = [self]


def test_a_model_freed_by_its_reference_count_costs_no_collection_and_one_in_a_cycle_is_collected(monkeypatch):
    walks = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: walks.append(gc.get_freeze_count()) or real_collect(*a))
    for cyclic in (False, True):
        cache = ModelCache(loader=lambda spec, cyclic=cyclic, **_: Model(cyclic), max_models=1)
        weight = weakref.ref(cache.get("a").hf_model.weight)
        heap.release()  # a walk: what is frozen now is the measure of growth
        walks.clear()
        cache.get("b")  # "a" leaves the cache
        assert weight() is None, "the evicted model's tensor is still alive"
        if cyclic:  # the collection that freed it walked the objects that were frozen
            assert walks and walks[0] == 0
        else:  # freed by its reference count: a settle, which leaves the frozen objects unwalked
            assert walks and all(count > 0 for count in walks)


def test_a_release_for_what_is_gone_only_settles_until_the_frozen_objects_have_doubled():
    heap.release()
    gone = [weakref.ref(Network().weight)]
    assert heap.release(gone) is False
    assert heap.release(None) is True
    kept = [Node() for _ in range(gc.get_freeze_count() * 3 // 2)]  # live objects half again as many as the frozen
    assert heap.release(gone) is False  # frozen by this settle: 2.5 times what there was after the walk
    assert heap.release(gone) is True  # more than doubled: walked
    assert heap.release(gone) is False
    del kept


def test_no_collection_runs_while_models_load_and_the_collector_is_back_after_the_last():
    """Two loads at once (two sessions): the collector stays off until both have ended, then runs as before; a
    collector the process had turned off stays off."""
    first_in, second_done = threading.Event(), threading.Event()
    seen = {}

    def loader(spec, **_):
        seen[spec] = gc.isenabled()
        if spec == "a":  # the first load is still running when the second ends
            first_in.set()
            assert second_done.wait(10)
            seen["a, after b"] = gc.isenabled()
        return object()

    cache = ModelCache(loader=loader, max_models=3)
    first = threading.Thread(target=cache.get, args=("a",))
    first.start()
    assert first_in.wait(10)
    cache.get("b")
    second_done.set()
    first.join(10)
    assert seen == {"a": False, "b": False, "a, after b": False}
    assert gc.isenabled()

    gc.disable()
    try:
        cache.get("c")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_no_collection_walks_the_objects_a_load_makes_and_the_settle_after_it_collects_its_garbage():
    collections, made = [], []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    def loader(spec, **_):
        gc.callbacks.append(count)
        try:
            garbage = [Node() for _ in range(20_000)]  # 28 times the collector's first threshold
            made.append(weakref.ref(garbage[-1]))
        finally:
            gc.callbacks.remove(count)
        return object()

    ModelCache(loader=loader).get("a")
    assert collections == []
    assert made[0]() is None  # the load's cyclic garbage, collected once it had ended
