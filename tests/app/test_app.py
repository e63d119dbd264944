"""The whole app through Streamlit's AppTest (no browser): views render, inputs give messages."""

from __future__ import annotations

import html
import re

import pytest

from mha_viz.features.head_view import controls as head_view_keys
from tests.app.helpers import charts, frame, heatmap_tokens, open_box, open_page, shown, start_app

pytestmark = pytest.mark.model


def test_first_render_shows_minilm_model_view():
    at = start_app()
    assert not at.error
    assert at.title[0].value == "Model view"
    [grid] = charts(at)
    assert grid["data"][0]["type"] == "image" and len(grid["data"][1]["x"]) == 6 * 12
    assert "6 layers × 12 heads" in at.caption[0].value


def test_typed_sentence_gives_heatmap_of_its_tokens():
    at = start_app()
    open_page(at, "head_view")
    at.text_area(key="text").input("Dogs chase cats.").run()
    assert not at.exception and not at.error
    assert heatmap_tokens(at) == ["[CLS]", "dogs", "chase", "cats", ".", "[SEP]"]


def test_open_head_button_and_layer_head_selectors():
    at = start_app()
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
    assert "lawn" in heatmap_tokens(at)
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    assert spec["layout"]["title"]["text"].startswith("Layer 4, head 7")
    next(s for s in at.selectbox if s.label == "Head").set_value(2).run()
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    assert spec["layout"]["title"]["text"].startswith("Layer 4, head 2")


def test_example_picker_fills_the_text():
    at = start_app()
    at.selectbox(key="example").set_value("Repeated phrase (induction)").run()
    assert at.text_area(key="text").value.startswith("Harry Potter")
    assert not at.exception


@pytest.mark.parametrize("text", ["", "   \n "])
def test_blank_text_gives_a_prompt(text):
    at = start_app()
    at.text_area(key="text").input(text).run()
    assert not at.exception
    assert any("Type a sentence" in i.value for i in at.info)


def test_long_text_shows_truncation_note():
    at = start_app()
    at.text_area(key="text").input("word " * 600).run()
    assert not at.exception
    assert any("602 tokens" in w.value and "first 512" in w.value for w in at.warning)


def test_an_empty_text_after_a_cut_one_says_the_cut_is_the_shown_results():
    """The last successful result stays drawn under an empty sentence, and so does its cut: said as that result's,
    not as if the empty box had been cut (found trying the app as a new user)."""
    at = start_app()
    at.text_area(key="text").input("word " * 600).run()
    at.text_area(key="text").input("  ").run()
    assert not at.exception and at.text_area(key="text").value == "  "
    assert any("last successful result" in c.value for c in at.caption)
    cut = [w.value for w in at.warning if "were kept" in w.value]
    assert cut and all(w.startswith("The text shown, the last successful one, has 602 tokens") for w in cut), cut
    open_page(at, "examples")  # a page that draws no stale result: no cut to speak of
    assert not at.exception and not [w.value for w in at.warning if "were kept" in w.value]


def test_a_long_paste_shows_its_count_as_an_estimate():
    at = start_app()
    at.text_area(key="text").input("word " * 12_000).run()  # 60,000 characters: 12,002 tokens, estimated
    assert not at.exception
    [said] = [m for w in at.warning if (m := re.search(r"The text has about ([\d,]+) tokens; the first 512 were kept",
                                                        w.value))]
    assert abs(int(said[1].replace(",", "")) - 12_002) <= 0.06 * 12_002  # tests/models/test_text_prefix.py's tolerance


@pytest.mark.parametrize("text,pieces", [
    ("<script>alert(1)</script>", ["<", "script", ">", "alert", "(", "1", ")", "<", "/", "script", ">"]),
    ("<img src=x onerror=alert(1)>",
     ["<", "im", "g", "sr", "c", "=", "x", "one", "rro", "r", "=", "alert", "(", "1", ")", ">"]),
    ("[x](javascript:alert(1))", ["[", "x", "]", "(", "java", "script", ":", "alert", "(", "1", ")", ")"]),
    ("$\\href{javascript:alert(1)}{x}$",
     ["$", "\\", "hr", "ef", "{", "java", "script", ":", "alert", "(", "1", ")", "}", "{", "x", "}", "$"]),
    ("😀" * 300, ["[UNK]"]),  # one word longer than WordPiece's 100 characters
    ("שלום \u202eevil\u200b", ["ש", "ל", "ו", "ם", "evil"]),  # the tokenizer drops format characters
    ("a\x00b", ["ab"]),  # and NUL
], ids=["script", "img", "md-link", "latex", "emoji", "rtl-zw", "nul"])
def test_hostile_or_odd_text_is_shown_as_text(text, pieces):
    """Every piece of the text is shown as itself, on the heatmap's axes and in the table: HTML
    escaped for Plotly (which renders tags in labels), Markdown and LaTeX characters kept (a
    rendered link or formula would consume them), nothing dropped."""
    at = start_app()
    open_page(at, "head_view")
    at.text_area(key="text").input(text).run()
    assert not at.exception and not at.error
    assert at.text_area(key="text").value == text
    tokens = heatmap_tokens(at)
    assert tokens == ["[CLS]", *pieces, "[SEP]"]
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    raw = [x.split("\u200b", 1)[0] for x in spec["data"][0]["x"]]  # without the suffix of repeats
    assert raw == [html.escape(t, quote=False) for t in tokens]  # what Plotly gets: escaped, not marked up
    labels = "".join(raw)
    assert "<script" not in labels and "<img" not in labels and "<" not in labels and ">" not in labels
    open_box(at, head_view_keys.STRONGEST_OPEN)  # the table of each query's strongest key, built only while open
    assert frame(at, "query")["query"].tolist() == tokens  # the table shows the same pieces as plain text


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
    at = start_app()
    at.text_area(key="text").input("My own sentence.").run()
    at.selectbox(key="model_choice").set_value("Other: hub id or folder…").run()
    at.text_input(key="model_other").input(spec).run()
    assert not at.exception
    assert any(needle in shown(e.value) for e in at.error), [e.value for e in at.error]
    # the message quotes the id as typed: every Markdown / HTML character escaped
    assert any(spec[:60] in shown(e.value) and spec[:60] not in e.value for e in at.error) or \
        spec.startswith(("someone", "/"))
    # nor a bare URL that Markdown would autolink once the escapes are read
    assert not any("http://" in e.value.replace("\\", "") for e in at.error)
    assert at.text_area(key="text").value == "My own sentence."
    assert any("last successful result" in c.value for c in at.caption)
    assert charts(at)  # the last good overview is still drawn


def test_smollm2_and_our_attention_in_the_facts():
    at = start_app()
    at.selectbox(key="model_choice").set_value("smollm2").run()
    at.toggle(key="local_attention").set_value(True).run()
    open_page(at, "model_facts")
    assert not at.exception and not at.error
    facts = dict(zip(at.table[0].value["fact"], at.table[0].value["value"]))
    assert facts["layers"] == "30" and facts["attention heads per layer"] == "9"
    assert facts["key/value heads per layer"].startswith("3 (grouped-query")
    assert facts["attention implementation"].startswith("ours")
    assert facts["device"] == "cpu" and facts["d_model"] == "576" and facts["d_k (per head)"] == "64"
