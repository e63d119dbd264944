"""The whole app through Streamlit's AppTest (no browser): views render, inputs give messages."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mha_viz import figures

APP = str(Path(__file__).resolve().parents[1] / "app.py")
HEAD = "mha_viz/ui/pages/head_view.py"
FACTS = "mha_viz/ui/pages/model_facts.py"
pytestmark = pytest.mark.model


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.run()
    assert not at.exception, at.exception
    return at


def _decode(obj):
    """Plotly sends numpy arrays as {"dtype", "bdata"[, "shape"]}: turn them back into lists."""
    if isinstance(obj, dict) and "bdata" in obj and "dtype" in obj:
        arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=obj["dtype"])
        if "shape" in obj:
            arr = arr.reshape([int(x) for x in str(obj["shape"]).split(",")])
        return arr.tolist()
    if isinstance(obj, dict):
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def _charts(at):
    """The plotly figures on the page, as dicts with arrays decoded."""
    return [_decode(json.loads(c.proto.spec)) for c in at.get("plotly_chart")]


def shown(markdown: str) -> str:
    """What a message written with `state.plain` reads as on screen (escapes removed)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _heatmap_tokens(at) -> list[str]:
    spec = next(s for s in _charts(at) if s["data"][0]["type"] == "heatmap")
    return [figures.label_text(x) for x in spec["data"][0]["x"]]


def test_first_render_shows_minilm_model_view():
    at = _app()
    assert not at.error
    assert at.title[0].value == "Model view"
    [grid] = _charts(at)
    assert grid["data"][0]["type"] == "image" and len(grid["data"][1]["x"]) == 6 * 12
    assert "6 layers × 12 heads" in at.caption[0].value


def test_typed_sentence_gives_heatmap_of_its_tokens():
    at = _app()
    at.switch_page(HEAD).run()
    at.text_area(key="text").input("Dogs chase cats.").run()
    assert not at.exception and not at.error
    assert _heatmap_tokens(at) == ["[CLS]", "dogs", "chase", "cats", ".", "[SEP]"]


def test_open_head_button_and_layer_head_selectors():
    at = _app()
    at.text_area(key="text").input("Dogs chase cats on the lawn.").run()
    at.radio(key="device").set_value("cpu").run()
    at.selectbox(key="grid_layer").set_value(4)
    at.number_input(key="grid_head").set_value(7)
    at.button(key="open_head").click().run()
    assert not at.exception
    assert at.title[0].value == "Head view"
    # the switch of page keeps what the user typed and chose (Streamlit alone would drop it)
    assert at.text_area(key="text").value == "Dogs chase cats on the lawn."
    assert at.radio(key="device").value == "cpu"
    assert "lawn" in _heatmap_tokens(at)
    spec = next(s for s in _charts(at) if s["data"][0]["type"] == "heatmap")
    assert spec["layout"]["title"]["text"].startswith("Layer 4, head 7")
    next(s for s in at.selectbox if s.label == "Head").set_value(2).run()
    spec = next(s for s in _charts(at) if s["data"][0]["type"] == "heatmap")
    assert spec["layout"]["title"]["text"].startswith("Layer 4, head 2")


def test_example_picker_fills_the_text():
    at = _app()
    at.selectbox(key="example").set_value("Repeated phrase (induction)").run()
    assert at.text_area(key="text").value.startswith("Harry Potter")
    assert not at.exception


@pytest.mark.parametrize("text", ["", "   \n "])
def test_blank_text_gives_a_prompt(text):
    at = _app()
    at.text_area(key="text").input(text).run()
    assert not at.exception
    assert any("Type a sentence" in i.value for i in at.info)


def test_long_text_shows_truncation_note():
    at = _app()
    at.text_area(key="text").input("word " * 600).run()
    assert not at.exception
    assert any("602 tokens" in w.value and "first 512" in w.value for w in at.warning)


@pytest.mark.parametrize("text", [
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))",
    "$\\href{javascript:alert(1)}{x}$", "😀" * 300, "שלום \u202eevil\u200b", "a\x00b",
], ids=["script", "img", "md-link", "latex", "emoji", "rtl-zw", "nul"])
def test_hostile_or_odd_text_is_shown_as_text(text):
    at = _app()
    at.switch_page(HEAD).run()
    at.text_area(key="text").input(text).run()
    assert not at.exception and not at.error
    assert at.text_area(key="text").value == text
    tokens = _heatmap_tokens(at)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    spec = next(s for s in _charts(at) if s["data"][0]["type"] == "heatmap")
    labels = json.dumps(list(spec["data"][0]["x"]))
    assert "<script" not in labels and "<img" not in labels


@pytest.mark.parametrize("spec,needle", [
    ("someone/no-such-model-xyz", "cannot be reached"),
    ("<empty folder>", "holds no model"),
    ("http://127.0.0.1:1/x", "neither a folder"),
    ("[x](javascript:alert(1))", "neither a folder"),
    ("![i](http://127.0.0.1:1/i.png) $x$ :red[y] <b>z</b>", "neither a folder"),
])
def test_bad_model_gives_error_and_keeps_text_and_last_result(spec, needle, tmp_path):
    if spec == "<empty folder>":  # a real folder that exists wherever the tests run
        (tmp_path / "notes.txt").write_text("not a model")
        spec = str(tmp_path)
    at = _app()
    at.text_area(key="text").input("My own sentence.").run()
    at.selectbox(key="model_choice").set_value("Other: hub id or folder…").run()
    at.text_input(key="model_other").input(spec).run()
    assert not at.exception
    assert any(needle in shown(e.value) for e in at.error), [e.value for e in at.error]
    # the message quotes the id as typed: every Markdown / HTML character escaped
    assert any(spec[:60] in shown(e.value) and spec[:60] not in e.value for e in at.error) or \
        spec.startswith(("someone", "/"))
    assert at.text_area(key="text").value == "My own sentence."
    assert any("last successful result" in c.value for c in at.caption)
    assert _charts(at)  # the last good overview is still drawn


def test_smollm2_and_our_attention_in_the_facts():
    at = _app()
    at.selectbox(key="model_choice").set_value("smollm2").run()
    at.toggle(key="local_attention").set_value(True).run()
    at.switch_page(FACTS).run()
    assert not at.exception and not at.error
    facts = dict(zip(at.table[0].value["fact"], at.table[0].value["value"]))
    assert facts["layers"] == "30" and facts["attention heads per layer"] == "9"
    assert facts["key/value heads per layer"].startswith("3 (grouped-query")
    assert facts["attention implementation"].startswith("ours")
    assert facts["device"] == "cpu" and facts["d_model"] == "576" and facts["d_k (per head)"] == "64"
