"""An encoder–decoder (a random-init T5 folder) in the app: the sidebar offers a target text and
*Attention: Encoder | Decoder | Cross*; every page draws the encoder's and the decoder's
self-attention or says why it cannot; cross-attention is drawn, rectangular, by the Model view,
the Head view, the Line view (target left, source right), Token focus and Head metrics (the
metrics of a rectangular pattern), and the other pages say to pick Encoder or Decoder."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.drawing import style as figure_style
from mha_viz.ui.shell.sidebar import OTHER
from tests.app.helpers import PAGE_IDS, charts, open_page, start_app

SOURCE = "The cat sat on the mat."
CROSS_PAGES = {"model_view", "head_view", "head_metrics", "lines", "focus"}
FORWARD_PAGES = {"teaching", "ablation", "qk", "corpus", "examples", "compare", "prediction", "circuit", "task",
                 "retrieval"}


@pytest.fixture()
def t5_app(t5_dir):
    at = start_app()
    at.selectbox(key="model_choice").set_value(OTHER).run()
    at.text_input(key="model_other").input(str(t5_dir)).run()
    at.text_area(key="text").input(SOURCE).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    return at


def _infos(at) -> str:
    return " ".join(i.value for i in at.info)


@pytest.mark.parametrize("part", ["Encoder", "Decoder", "Cross"])
def test_every_page_draws_the_part_or_says_why(t5_app, part):
    at = t5_app
    at.button_group(key="attn_part").set_value(part).run()
    res = at.session_state["_current"].seq2seq
    assert res is not None and res.written  # no target typed: the model wrote one
    for page in PAGE_IDS:
        open_page(at, page)
        assert not at.exception, (page, part, at.exception)
        assert not at.error, (page, part, [e.value for e in at.error])
        assert not [w.value for w in at.warning if "did not work" in w.value], (page, part)  # Export, Share…
        if page in FORWARD_PAGES:
            assert "encoder–decoder" in _infos(at), (page, part)
        elif part == "Cross" and page not in CROSS_PAGES | {"generate", "model_facts"}:
            assert "pick Encoder or Decoder" in _infos(at), page
    open_page(at, "head_view")
    heat = next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")["data"][0]
    z = np.array(heat["z"], dtype=float)
    run = {"Encoder": res.encoder, "Decoder": res.decoder}.get(part)
    if run is None:  # cross: target tokens down, source tokens across
        assert z.shape == (res.decoder.n, res.encoder.n)
        np.testing.assert_allclose(z, res.cross.attentions[0, 0], atol=1e-6)
    else:
        np.testing.assert_allclose(z, run.attentions[0, 0], atol=1e-6)


def test_a_typed_target_is_read_as_typed(t5_app):
    at = t5_app
    at.text_area(key="target").input("A dog ran.").run()
    at.button_group(key="attn_part").set_value("Cross").run()
    assert not at.exception and not at.error
    res = at.session_state["_current"].seq2seq
    assert not res.written and res.target == "A dog ran."
    assert any("as typed" in c.value for c in at.caption)
    open_page(at, "head_view")
    assert not at.exception and not at.error
    assert at.dataframe[0].value["target token"].tolist() == res.decoder.tokens
    open_page(at, "lines")  # the target on the left, the source on the right
    assert not at.exception and not at.error
    fig = charts(at)[0]
    columns = {t["name"]: t["text"] for t in fig["data"] if t.get("name") in ("query tokens", "key tokens")}
    assert columns == {"query tokens": figure_style.axis_labels(res.decoder.tokens),
                       "key tokens": figure_style.axis_labels(res.encoder.tokens)}


def test_cross_attention_metrics_are_the_rectangular_ones(t5_app):
    from mha_viz.metrics import cross_attention as cross_metrics

    at = t5_app
    at.button_group(key="attn_part").set_value("Cross").run()
    open_page(at, "head_metrics")
    assert not at.exception and not at.error
    res = at.session_state["_current"].seq2seq
    table = at.dataframe[0].value
    assert list(table.columns) == ["layer", "head", *cross_metrics.COLUMNS]
    want = cross_metrics.cross_stats(res.cross.attentions, res.cross.key_special)
    np.testing.assert_allclose(table["alignment"].to_numpy(), want["alignment"].ravel(), atol=1e-6)
    assert any("apply to self-attention" in c.value for c in at.caption)


def test_token_focus_on_cross_attention_reads_either_side(t5_app):
    at = t5_app
    at.button_group(key="attn_part").set_value("Cross").run()
    open_page(at, "focus")
    res = at.session_state["_current"].seq2seq
    cross = res.cross
    at.selectbox(key="cross_focus_token").set_value(2).run()  # target token 2: its row, over the source
    z = np.array(charts(at)[0]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, cross.attentions[:, :, 2, :].reshape(-1, cross.n_keys), atol=1e-6)
    at.radio(key="cross_focus_side").set_value(at.radio(key="cross_focus_side").options[1]).run()
    at.selectbox(key="cross_focus_token").set_value(1).run()  # source token 1: its column, over the target
    assert not at.exception and not at.error
    z = np.array(charts(at)[0]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, cross.attentions[:, :, :, 1].reshape(-1, cross.n_queries), atol=1e-6)


def test_the_generate_page_steps_through_the_written_target(t5_app):
    at = t5_app
    open_page(at, "generate")
    assert not at.exception and not at.error
    res = at.session_state["_current"].seq2seq
    assert len(res.steps) >= 2
    at.slider(key="s2s_step").set_value(2).run()
    assert any(m.value.startswith("**Step 2:") for m in at.markdown)
    cross_fig, self_fig = charts(at)[:2]
    np.testing.assert_allclose(np.array(cross_fig["data"][0]["z"], dtype=float),
                               res.cross.attentions[:, :, 1, :].reshape(-1, res.encoder.n), atol=1e-6)  # row 1
    np.testing.assert_allclose(np.array(self_fig["data"][0]["z"], dtype=float),
                               res.decoder.attentions[:, :, 1, :].reshape(-1, res.decoder.n), atol=1e-6)
