"""Share a view by link, through AppTest: a link's query parameters open the app on its model,
text, head and options; a bad part of a link gives a notice (no exception) and the rest applies;
the URL follows the view after every run, and the sidebar's Share box holds the link.

(AppTest cannot open a page by its URL path: tests/e2e/test_e2e_links.py covers the path.)"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from mha_viz.export import link_params as links
from mha_viz.export import shared_controls
from mha_viz.features.compare import controls as compare_keys
from mha_viz.ui.kit import keys
from tests.app.helpers import app_test, charts, open_box, open_page, share_box

pytestmark = pytest.mark.model

TEXT = "Dogs chase cats in the garden."
BASE = "http://mha-viz.example:8501"


def _open(**params: str) -> AppTest:
    """The app's first run on a link with these query parameters, at BASE; no exception."""
    at = app_test()
    at.query_params.update(params)
    at.context["url"] = BASE
    at.run()
    assert not at.exception, at.exception
    return at


def _notices(at) -> str:
    return " ".join(w.value for w in at.warning)


def _title(at) -> str:
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    return spec["layout"]["title"]["text"]


def _share(at) -> str:
    """The link in the Share box, opened, then closed again (closed, the box sends no link)."""
    assert not at.sidebar.code
    [code] = share_box(at).sidebar.code
    open_box(at, keys.SHARE_OPEN, False)
    return code.value


def test_a_link_opens_its_text_and_head():
    at = _open(model="minilm", text=TEXT, layer="2", head="3")
    assert not at.warning and not at.error
    assert at.text_area(key=keys.TEXT).value == TEXT
    assert at.selectbox(key=keys.MODEL_CHOICE).value == "minilm"
    assert (at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]) == (2, 3)
    assert at.session_state[keys.CURRENT].run.text == TEXT
    open_page(at, "head_view")
    assert _title(at).startswith("Layer 2, head 3")
    params = {"model": "minilm", "text": TEXT, "layer": "2", "head": "3"}
    assert _share(at) == links.url(BASE, "head_view", params)


def test_the_url_follows_the_view():
    at = _open(model="minilm", text=TEXT, layer="2", head="3", evil="1")
    assert at.query_params == {"model": "minilm", "text": TEXT, "layer": "2", "head": "3"}  # evil dropped
    at.text_area(key=keys.TEXT).input("Birds sing.").run()
    open_page(at, "head_view")
    next(s for s in at.selectbox if s.label == "Head").set_value(7).run()
    next(s for s in at.selectbox if s.label == "Layer").set_value(4).run()
    at.radio(key=keys.HEAD_DETAIL).set_value("words").run()
    at.checkbox(key=keys.HIDE_SPECIAL).check().run()
    assert not at.exception
    assert at.query_params == {"model": "minilm", "text": "Birds sing.", "layer": "4", "head": "7",
                               "detail": "words", "hide": "special"}
    assert _share(at).startswith(f"{BASE}/head_view?model=minilm&text=Birds%20sing.&layer=4&head=7")
    # back to the defaults: only the model is named
    at.text_area(key=keys.TEXT).input("The cat sat on the mat because it was tired.").run()
    at.checkbox(key=keys.HIDE_SPECIAL).uncheck().run()
    at.radio(key=keys.HEAD_DETAIL).set_value("every token").run()
    next(s for s in at.selectbox if s.label == "Layer").set_value(0).run()
    next(s for s in at.selectbox if s.label == "Head").set_value(0).run()
    # *Why here?* stayed closed (a box built only while open): no query and key of it chosen, none carried
    assert shared_controls.WHY_QUERY not in [s.key for s in at.selectbox]
    assert at.query_params == {"model": "minilm"}
    assert _share(at) == f"{BASE}/head_view?model=minilm"


def test_options_of_a_link_apply():
    at = _open(model="toy-induction", text="a b c d a b c", layer="1", head="0", detail="words",
               hide="first", mha="ours", show="contributions")
    assert not at.warning and not at.error
    assert at.selectbox(key=keys.MODEL_CHOICE).value == "toy-induction"
    assert at.toggle(key=keys.LOCAL_ATTENTION).value is True
    assert at.radio(key=keys.LENS).value == keys.LENS_CONTRIBUTIONS
    assert at.checkbox(key=keys.HIDE_FIRST).value is True
    assert at.checkbox(key=keys.HIDE_SPECIAL).value is False
    assert at.session_state[keys.CURRENT].model.implementation.startswith("ours")
    open_page(at, "head_view")
    assert at.radio(key=keys.HEAD_DETAIL).value == "words"
    assert _title(at).startswith("Layer 1, head 0") and "value-weighted" in _title(at)
    assert at.query_params == {"model": "toy-induction", "text": "a b c d a b c", "layer": "1",
                               "detail": "words", "hide": "first", "mha": "ours",
                               "show": "contributions"}  # head 0 is the default


def test_a_long_text_opens_on_the_links_detail():
    """Over 256 tokens the head view opens on blocks; a link's own detail level wins."""
    text = "word " * 290  # 1,450 characters, 292 tokens
    at = _open(model="minilm", text=text, detail="tokens")
    open_page(at, "head_view")
    assert at.radio(key=keys.HEAD_DETAIL).value == "every token"
    assert at.query_params["detail"] == "tokens"  # not the default at this length
    at.radio(key=keys.HEAD_DETAIL).set_value("all tokens, in blocks").run()
    assert "detail" not in at.query_params


def test_a_bad_link_gives_a_notice_and_the_rest_applies():
    at = _open(model="minilm", text="<script>alert(1)</script> is text", layer="99", head="x", evil="1")
    assert not at.error
    notices = _notices(at)
    assert "layer 99" in notices and "0–5" in notices  # as escaped Markdown: the digits stay
    assert "head “x”" in notices and "evil" in notices
    assert at.text_area(key=keys.TEXT).value == "<script>alert(1)</script> is text"
    assert (at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]) == (0, 0)
    assert all("<script>" not in w.value for w in at.warning)  # quoted input is escaped
    at.text_area(key=keys.TEXT).input("Next.").run()  # the notice is shown once
    assert not at.warning and not at.exception


def test_text_too_long_for_a_link():
    long = "word " * 400  # 2,000 characters: over links.MAX_TEXT_CHARS
    at = _open(model="minilm", text=long, head="4")
    assert "more than the 1,500" in _notices(at)
    assert at.text_area(key=keys.TEXT).value != long and at.session_state[keys.SEL_HEAD] == 4
    at.text_area(key=keys.TEXT).input(long).run()
    assert "text" not in at.query_params and at.query_params["head"] == "4"
    assert any("too long to share by link" in c.value for c in share_box(at).sidebar.caption)


def test_public_mode_refuses_a_model_outside_the_allow_list(public):
    at = _open(model="gpt2", text="Public links work.", head="5")
    assert "does not offer" in _notices(at) and "gpt2" in _notices(at)
    assert at.selectbox(key=keys.MODEL_CHOICE).value == "minilm"
    assert at.text_area(key=keys.TEXT).value == "Public links work."
    assert at.session_state[keys.SEL_HEAD] == 5
    assert at.query_params == {"model": "minilm", "text": "Public links work.", "head": "5"}


def _compared_head(at) -> dict[str, str]:
    """The head Compare shows (the one that changed most, as nothing chose one) as a link writes it: nothing for
    layer 0 or head 0 (a link leaves its defaults out), else its layer (these models' rows are their layers) and
    head."""
    shown = {"layer": at.session_state[compare_keys.CMP_LAYER], "head": at.session_state[compare_keys.CMP_HEAD]}
    return {name: str(value) for name, value in shown.items() if value}


def test_a_compare_link_opens_sentence_b_and_follows_the_page():
    at = _open(model="minilm", text=TEXT, text_b="Cats chase dogs in the garden.")
    open_page(at, "compare")
    assert not at.warning and not at.error and not at.exception
    assert at.radio(key=compare_keys.CMP_MODE).value == compare_keys.TEXTS
    assert at.text_area(key=compare_keys.CMP_TEXT_B).value == "Cats chase dogs in the garden."
    assert at.query_params == {"model": "minilm", "text": TEXT, "text_b": "Cats chase dogs in the garden.",
                               **_compared_head(at)}
    assert "text_b=Cats%20chase%20dogs" in _share(at)
    at.radio(key=compare_keys.CMP_MODE).set_value(compare_keys.MODELS).run()  # B: minilm with our MHA by default
    assert not at.exception
    assert at.query_params == {"model": "minilm", "text": TEXT, "compare": "models", "model_b": "minilm",
                               "mha_b": "ours", **_compared_head(at)}
    open_page(at, "head_view")  # other pages carry no run B
    assert set(at.query_params) <= {"model", "text", "layer", "head"}


def test_a_compare_link_opens_model_b():
    at = _open(model="toy-induction", text="a b c d a b c", compare="models", model_b="toy-induction",
               mha_b="hf", mha="ours")
    open_page(at, "compare")
    assert not at.warning and not at.error and not at.exception
    assert at.radio(key=compare_keys.CMP_MODE).value == compare_keys.MODELS
    assert at.selectbox(key=compare_keys.CMP_MODEL_B).value == "toy-induction"
    assert at.toggle(key=compare_keys.CMP_LOCAL_B).value is False and at.toggle(key=keys.LOCAL_ATTENTION).value is True
    assert at.query_params == {"model": "toy-induction", "text": "a b c d a b c", "mha": "ours",
                               "compare": "models", "model_b": "toy-induction", "mha_b": "hf", **_compared_head(at)}


def test_a_bad_compare_link_gives_notices_and_the_rest_applies():
    at = _open(model="minilm", text=TEXT, compare="both", text_b="x" * 2000, mha_b="maybe")
    notices = _notices(at)
    assert "compare “both”" in notices and "sentence B “xxxx" in notices and "1,500 characters" in notices
    assert "“maybe”" in notices
    open_page(at, "compare")
    assert not at.error and not at.exception
    assert at.radio(key=compare_keys.CMP_MODE).value == compare_keys.TEXTS
    assert at.text_area(key=compare_keys.CMP_TEXT_B).value == compare_keys.DEFAULT_TEXT_B
