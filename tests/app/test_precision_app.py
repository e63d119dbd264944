"""The sidebar's *Precision* through AppTest: bfloat16 loads the model in half precision (Model
facts says so), every view's run is float32 with rows summing to 1 and within 2e-2 of float32's,
the link carries it, and a link's dtype applies; Compare says when A and B differ in precision."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import compare
from mha_viz.ui.kit import keys
from tests.app.helpers import app_test, open_page, start_app

pytestmark = pytest.mark.model


def _facts(at) -> dict:
    open_page(at, "model_facts")
    return dict(zip(at.table[0].value["fact"], at.table[0].value["value"]))


def test_bfloat16_from_the_sidebar():
    at = start_app()
    assert at.radio(key=keys.PRECISION).value == "auto"
    full = at.session_state[keys.CURRENT].run
    assert full.precision == "float32"  # a bundled model under auto
    at.radio(key=keys.PRECISION).set_value("bfloat16").run()
    assert not at.exception and not at.error
    cur = at.session_state[keys.CURRENT]
    assert cur.model.precision == "bfloat16" and cur.run.precision == "bfloat16"
    assert cur.key.model.precision == "bfloat16"  # cached results are filed apart from float32's
    half = cur.run
    assert half.attentions.dtype == np.float32 and np.abs(half.attentions.sum(-1) - 1).max() < 1e-5
    assert 0 < np.abs(half.attentions - full.attentions).max() < 2e-2
    assert _facts(at)["precision"] == "bfloat16"
    assert at.query_params.get("dtype") == "bfloat16"  # the link says it; auto is left out
    assert at.text_area(key=keys.TEXT).value  # the sentence stays


def test_a_links_dtype_applies_and_a_bad_one_is_a_notice():
    at = app_test()
    at.query_params.update({"model": "minilm", "dtype": "float16"})
    at.run()
    assert not at.exception
    assert at.radio(key=keys.PRECISION).value == "float16"
    assert at.session_state[keys.CURRENT].model.precision == "float16"
    at = app_test()
    at.query_params.update({"model": "minilm", "dtype": "int4"})
    at.run()
    assert not at.exception and at.radio(key=keys.PRECISION).value == "auto"
    assert any("dtype “int4” is not one of auto, float32, bfloat16, float16" in w.value for w in at.warning)


def test_comparing_runs_of_two_precisions_says_so():
    at = start_app()
    a = at.session_state[keys.CURRENT].run
    at.radio(key=keys.PRECISION).set_value("bfloat16").run()
    b = at.session_state[keys.CURRENT].run
    note = compare(a, b).precision_note
    assert note and "float32" in note and "bfloat16" in note
    assert compare(a, a).precision_note is None


def _emulated(at) -> list[str]:
    return [c.value for c in at.sidebar.caption if "has no native support" in c.value]


def _cpu_without_half(monkeypatch, bf16: bool) -> None:
    """The CPU as torch reports it: with AVX512-BF16 (`bf16`) or with no native half precision at all."""
    import torch

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16)
    for check in ("_is_amx_tile_supported", "_is_amx_fp16_supported"):
        monkeypatch.setattr(torch.cpu, check, lambda: False)
    monkeypatch.setattr("platform.machine", lambda: "x86_64")


def test_a_precision_the_cpu_does_not_compute_natively_is_said_where_it_is_chosen(monkeypatch):
    """On a CPU without native bfloat16 the sidebar says so under *Precision* once the model computes in it;
    float32 never gets the note, and a CPU with AVX512-BF16 does not get it for bfloat16."""
    _cpu_without_half(monkeypatch, bf16=False)
    at = start_app()
    assert at.session_state[keys.CURRENT].model.precision == "float32" and not _emulated(at)
    at.radio(key=keys.PRECISION).set_value("bfloat16").run()
    assert not at.exception and at.session_state[keys.CURRENT].model.device.type == "cpu"
    [note] = _emulated(at)
    assert note.startswith("bfloat16 has no native support on this CPU") and "much slower than float32" in note
    at.radio(key=keys.PRECISION).set_value("float32").run()
    assert not _emulated(at)
    _cpu_without_half(monkeypatch, bf16=True)
    at.radio(key=keys.PRECISION).set_value("bfloat16").run()
    assert at.session_state[keys.CURRENT].model.precision == "bfloat16" and not _emulated(at)
