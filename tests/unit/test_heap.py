"""What the garbage collector walks (`mha_viz.budget.heap`): after `settle` what was alive is left out of every
collection (Streamlit's after each run walked SmolLM2's 200,000 objects: 0.1 s a click), what a cycle held
then is collected only after `release`; the model cache settles after each load and releases when a model
leaves it."""

from __future__ import annotations

import gc
import weakref

import pytest

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
    monkeypatch.setattr(heap, "release", lambda: calls.append("release"))
    cache = ModelCache(loader=lambda spec, **_: object(), max_models=1)
    cache.get("a")
    assert calls == ["settle"]
    cache.get("a")  # already loaded: nothing to settle
    assert calls == ["settle"]
    cache.get("b")  # "a" leaves the cache
    assert calls == ["settle", "release"]
