"""Loading without a model: the messages a user sees for names, folders and devices that cannot
be loaded, the device choice, and the model cache (with a fake loader)."""

from __future__ import annotations

import json
import threading

import pytest
import torch

import mha_viz
import mha_viz_models
from mha_viz.budget.model_cache import ModelCache
from mha_viz_models import ModelLoadError
from tests.waiting import blocked_in, wait_until


def test_unknown_hub_id_offline_says_what_to_do():
    with pytest.raises(ModelLoadError) as err:
        mha_viz.load_model("someone/no-such-model-xyz", device="cpu")
    msg = str(err.value)
    assert "someone/no-such-model-xyz" in msg and "internet" in msg
    # every bundled model, from the registry (a hand-written list named two of three)
    assert all(name in msg for name in mha_viz_models.BUNDLED) and "toy-induction" in msg, msg


@pytest.mark.parametrize("spec,needle", [
    ("../../no/such/folder", "no folder"),
    ("http://127.0.0.1:1/x", "neither a folder"),
    ("bad id with spaces", "neither a folder"),
    ("x\x00y", "NUL"),
    ("   ", "No model given"),
])
def test_bad_model_names_give_messages(spec, needle):
    with pytest.raises(ModelLoadError, match=needle):
        mha_viz.load_model(spec, device="cpu")


def test_folder_without_model(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(ModelLoadError, match="holds no model"):
        mha_viz.load_model(str(tmp_path), device="cpu")


def test_unknown_architecture_is_refused_without_remote_code(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "my-secret-arch", "auto_map": {
        "AutoModel": "modeling_evil.EvilModel"}}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "modeling_evil.py").write_text("raise SystemExit('remote code ran')\n")
    with pytest.raises(ModelLoadError, match="never runs code"):
        mha_viz.load_model(str(tmp_path), device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_requested_without_cuda():
    with pytest.raises(ModelLoadError, match="no usable CUDA"):
        mha_viz.load_model("minilm", device="cuda")


def test_auto_device_picks_cpu_without_cuda():
    from mha_viz_models import resolve_device

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ModelLoadError, match="Unknown device"):
        resolve_device("tpu")


def test_model_cache_loads_each_model_once_under_concurrency():
    """8 sessions ask for one model at once: the first loads it while the 7 others are inside
    `get`, waiting for it (the loader returns only once they all are: no sleep), and all get it."""
    calls = []
    threads: list[threading.Thread] = []

    def slow_loader(spec, device, local_attention, progress=None, allow_pickle=False, dtype="auto"):
        calls.append(spec)
        if len(calls) == 1:  # the first load: the others arrive meanwhile
            others = [t for t in threads if t is not threading.current_thread()]
            assert wait_until(lambda: all(blocked_in(t, "get") for t in others), 30), "not all waited"
        return object()

    cache = ModelCache(loader=slow_loader, max_models=2)
    results = []
    threads += [threading.Thread(target=lambda: results.append(cache.get("a", "cpu"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert calls == ["a"] and len({id(r) for r in results}) == 1
    cache.get("b", "cpu")
    cache.get("a", "cpu")  # a is now the most recent
    cache.get("c", "cpu")  # evicts b, the least recently used
    assert ("a", "cpu", False, "auto") in cache and ("b", "cpu", False, "auto") not in cache and len(cache) == 2
    cache.get("a", "cpu", dtype="bfloat16")  # another precision is another model
    assert calls[-1] == "a" and calls.count("a") == 2


def _float32_cache(max_models: int) -> tuple[ModelCache, list[tuple[str, str]]]:
    """A cache whose loader records (spec, dtype asked for) and gives a model that chose float32 for "auto"."""
    calls = []

    class Model:
        precision = "float32"

    def loader(spec, device, local_attention, progress=None, allow_pickle=False, dtype="auto"):
        calls.append((spec, dtype))
        return Model()

    return ModelCache(loader=loader, max_models=max_models), calls


def test_the_cache_keeps_max_models_models_however_each_was_asked_for():
    """A model asked for as "auto" is kept under the precision it chose too: two keys, one model. The cache counts
    models, not keys (until stop 80 it counted keys, so three models kept meant one or two), and a use by either
    key makes the model the most recent."""
    cache, calls = _float32_cache(3)
    a, b, c = (cache.get(name, "cpu") for name in "abc")
    assert len(cache) == 3 and [spec for spec, _ in calls] == ["a", "b", "c"]
    assert cache.get("a", "cpu", dtype="float32") is a  # a, by the precision it chose: the most recent now
    cache.get("d", "cpu")  # evicts b, the least recently used, under both its keys
    assert len(cache) == 3 and [spec for spec, _ in calls] == ["a", "b", "c", "d"]
    assert ("b", "cpu", False, "auto") not in cache and ("b", "cpu", False, "float32") not in cache
    assert cache.get("a", "cpu") is a and cache.get("c", "cpu", dtype="float32") is c and calls[-1][0] == "d"


def test_auto_and_the_precision_it_chose_are_one_model():
    cache, calls = _float32_cache(4)
    first = cache.get("m", "cpu")  # auto: the checkpoint's float32
    assert cache.get("m", "cpu", dtype="float32") is first and calls == [("m", "auto")]
    cache.get("m", "cpu", dtype="bfloat16")
    assert calls == [("m", "auto"), ("m", "bfloat16")]
