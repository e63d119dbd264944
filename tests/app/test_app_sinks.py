"""The sidebar's *Hide tokens* through AppTest: special tokens and the first token dropped from
every view and renormalised, the label, the sink-mass grid, and awkward inputs (one token, every
token hidden)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import mha_viz
from mha_viz.ui.kit import keys
from tests.app.helpers import charts, heatmap_tokens, open_page, shown, start_app

pytestmark = pytest.mark.model


def _ok(at):
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_minilm_with_special_tokens_hidden():
    text = "The cat sat on the mat."
    at = start_app()
    at.text_area(key="text").input(text).run()
    at.checkbox(key=keys.HIDE_SPECIAL).check().run()
    _ok(at)
    assert "renormalised without \\[CLS\\], \\[SEP\\]" in _captions(at)
    # the sink-mass grid equals the attention to [CLS] and [SEP], computed here from a fresh capture
    run = mha_viz.analyze(mha_viz.load_model("minilm", device="cpu"), text)
    special = np.array(run.special_mask)
    expected = run.attentions[:, :, ~special][..., special].sum(-1).mean(-1)
    grid = next(c for c in charts(at)
                if c["layout"].get("title", {}).get("text", "").startswith("Attention to the hidden"))
    z = np.array(next(d["z"] for d in grid["data"] if d.get("type") == "heatmap"), dtype=float)
    np.testing.assert_allclose(z, expected, atol=1e-5)
    assert expected.max() > 0.3  # MiniLM's heads do look at [CLS] / [SEP]: the grid is not trivially 0
    open_page(at, "head_view")
    _ok(at)
    tokens = heatmap_tokens(at)
    assert "[CLS]" not in tokens and "[SEP]" not in tokens
    assert len(tokens) == run.n - 2
    assert "renormalised without" in _captions(at)
    open_page(at, "head_metrics")
    _ok(at)
    assert "Computed renormalised without" in _captions(at)
    # switched off again: every token is back
    at.checkbox(key=keys.HIDE_SPECIAL).uncheck().run()
    open_page(at, "head_view")
    _ok(at)
    assert heatmap_tokens(at)[0] == "[CLS]"


def test_toy_induction_with_the_first_token_hidden():
    at = start_app()
    at.selectbox(key="model_choice").set_value("toy-induction").run()
    at.text_area(key="text").input("a b c d a b c d").run()
    at.checkbox(key=keys.HIDE_FIRST).check().run()
    _ok(at)
    open_page(at, "head_view")
    _ok(at)
    assert heatmap_tokens(at) == list("abcdabcd")  # <bos>, the toy's sink, is gone
    assert "renormalised without the first token \\(\\<bos\\>\\)" in _captions(at)
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    z = np.array(spec["data"][0]["z"], dtype=float)
    sums = np.nansum(z, axis=1)
    assert np.all((np.abs(sums - 1) < 1e-3) | (sums == 0))  # renormalised rows, or rows left empty
    for page in ("model_view", "head_metrics", "compare_heads", "across_layers", "similarity"):
        open_page(at, page)
        _ok(at)


def test_the_rows_left_empty_are_said_with_the_heads_that_have_them():
    """SmolLM2, the first token hidden: the warning counts the query rows left with nothing to renormalise and names
    their heads; each head named draws exactly those rows as zeros, and the first head, not named, none."""
    at = start_app()
    at.selectbox(key="model_choice").set_value("smollm2").run()  # on the sidebar's default sentence
    at.checkbox(key=keys.HIDE_FIRST).check().run()
    open_page(at, "head_view")
    _ok(at)
    [warning] = [shown(w.value) for w in at.warning if "query row" in w.value]
    rows = int(warning.split(" query row")[0])
    named = re.findall(r"L(\d+) H(\d+)", warning)
    assert named and ("0", "0") not in named, warning

    def zero_rows(layer: int, head: int) -> int:
        at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(layer)
        at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(head).run()
        spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
        return int((np.nansum(np.array(spec["data"][0]["z"], dtype=float), axis=1) == 0).sum())

    assert sum(zero_rows(int(la), int(h)) for la, h in named) == rows  # SmolLM2's rows are its layers
    assert zero_rows(0, 0) == 0


def test_every_token_hidden_keeps_the_run():
    at = start_app()
    at.selectbox(key="model_choice").set_value("smollm2").run()
    at.text_area(key="text").input("Hello").run()  # one token, no BOS: hiding the first hides all
    at.checkbox(key=keys.HIDE_FIRST).check().run()
    _ok(at)
    assert any("would leave no token" in i.value for i in at.info)
    open_page(at, "head_view")
    _ok(at)
    assert heatmap_tokens(at) == ["Hello"]  # nothing lost: the full run is shown
    assert any("would leave no token" in i.value for i in at.info)
    assert "renormalised without" not in _captions(at)


def test_toy_one_token_left():
    at = start_app()
    at.selectbox(key="model_choice").set_value("toy-induction").run()
    at.text_area(key="text").input("a").run()
    at.checkbox(key=keys.HIDE_FIRST).check().run()
    for page in ("head_view", "head_metrics", "across_layers", "compare_heads", "model_view"):
        open_page(at, page)
        _ok(at)
        if page == "head_view":
            assert heatmap_tokens(at) == ["a"]


def test_minilm_one_word_with_special_tokens_hidden():
    at = start_app()
    at.text_area(key="text").input("cat").run()
    at.checkbox(key=keys.HIDE_SPECIAL).check().run()
    at.checkbox(key=keys.HIDE_FIRST).check().run()
    _ok(at)
    open_page(at, "head_view")
    _ok(at)
    assert heatmap_tokens(at) == ["cat"]
    for page in ("head_metrics", "across_layers", "model_view"):
        open_page(at, page)
        _ok(at)


def test_the_sidebar_names_the_special_tokens_a_text_holds():
    """Under *Special tokens*, the ones this text holds (what the box would hide), from the tokenizer's own marks:
    MiniLM's [CLS] and [SEP]; none in SmolLM2's plain text (it adds no <s>)."""
    at = start_app()
    at.text_area(key="text").input("The cat sat on the mat.").run()
    _ok(at)
    sidebar = shown(" ".join(c.value for c in at.sidebar.caption))
    assert "This text's: [CLS], [SEP]" in sidebar, sidebar
    at.selectbox(key=keys.MODEL_CHOICE).set_value("smollm2").run()
    _ok(at)
    run = at.session_state[keys.CURRENT].run
    sidebar = shown(" ".join(c.value for c in at.sidebar.caption))
    assert not any(run.special_mask) and "This text holds none." in sidebar, sidebar
