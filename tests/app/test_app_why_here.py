"""The Head view's *Why here?* (AppTest): a cell picked (what a click on the heatmap sets: its query and
key) draws that score's terms, equal to `mha_viz.circuits.qk_terms` computed here; the toy's induction head shows
its key written by the previous-token head; a second key draws the difference; *Whole head* draws the
pattern-weighted terms; the clickable heatmap's markers map back to the model's positions, with tokens
hidden too."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.drawing import heads as head_figures
from mha_viz.export import shared_controls
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.ui.kit import keys
from tests.app.helpers import app_test, charts, open_box, open_page, start_app

pytestmark = pytest.mark.model
TEXT = "q w e r t y u i q w e r t y u i"


def _terms_chart(at) -> dict:
    return next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Layer 1, head")
                and c["data"][0]["type"] == "heatmap" and "term" in str(c["data"][0].get("colorbar")))


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


@pytest.fixture(scope="module")
def opened():
    at = start_app()
    at.selectbox(key="model_choice").set_value("toy-induction").run()
    at.text_area(key="text").input(TEXT).run()
    open_page(at, "head_view")
    at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(1).run()
    at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(1).run()
    open_box(at, head_view_keys.WHY_OPEN)  # a box built only while open
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def test_a_picked_cell_draws_its_terms(opened, toy):
    at = opened
    at.selectbox(key=shared_controls.WHY_QUERY).set_value(10).run()
    at.selectbox(key=shared_controls.WHY_KEY).set_value(3).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    want = mha_viz.circuits.qk_terms(toy, TEXT, 1, 1, 10, 3)
    rows, cols, small = want.top(15)
    chart = _terms_chart(at)["data"][0]
    assert list(chart["y"]) == rows and list(chart["x"]) == cols
    np.testing.assert_allclose(np.array(chart["z"], dtype=float), small, atol=1e-6)
    bars = next(c for c in charts(at) if c["data"][0]["type"] == "bar" and "share of the score" in
                c["layout"]["title"]["text"])
    key_bars = bars["data"][1]
    assert key_bars["y"][-1] == "L0H1"  # the largest key part, drawn on top: the previous-token head
    assert f"{want.score:+.4f}" in " ".join(m.value for m in at.markdown)
    assert any("K-composition" in i.value for i in at.info)  # the toy's teaching text


def test_a_second_key_and_the_whole_head(opened, toy):
    at = opened
    at.selectbox(key=shared_controls.WHY_QUERY).set_value(10).run()
    at.selectbox(key=shared_controls.WHY_KEY).set_value(3).run()
    at.selectbox(key=shared_controls.WHY_SECOND).set_value(4).run()
    assert not at.exception and not at.error
    diff = mha_viz.circuits.qk_terms(toy, TEXT, 1, 1, 10, 3).minus(mha_viz.circuits.qk_terms(toy, TEXT, 1, 1, 10, 4))
    np.testing.assert_allclose(np.array(_terms_chart(at)["data"][0]["z"], dtype=float), diff.top(15)[2], atol=1e-6)
    assert "s(key) − s(second key)" in " ".join(m.value for m in at.markdown)
    at.toggle(key=shared_controls.WHY_PATTERN).set_value(True).run()
    assert not at.exception and not at.error
    whole = mha_viz.circuits.qk_pattern_terms(toy, TEXT, 1, 1)
    np.testing.assert_allclose(np.array(_terms_chart(at)["data"][0]["z"], dtype=float), whole.top(15)[2], atol=1e-6)
    at.toggle(key=shared_controls.WHY_PATTERN).set_value(False).run()


def test_the_heatmap_cells_can_be_clicked(opened):
    at = opened
    heat = next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")
    markers = heat["data"][1]
    n = len(heat["data"][0]["x"])
    assert markers["type"] == "scatter" and len(markers["x"]) == n * n
    assert head_figures.cell_pick([{"curve_number": 1, "point_index": 10 * n + 3}], n) == (10, 3)
    assert head_figures.cell_pick([{"curve_number": 1, "point_index": 2}], n, offset=5) == (5, 7)
    assert head_figures.cell_pick([{"curve_number": 0, "point_index": 2}], n) is None


@pytest.mark.parametrize("long", [False, True])
def test_the_section_is_built_only_while_open(monkeypatch, toy, long):
    """A dense run, and a long one (MHA_VIZ_DENSE_MB=0 makes any text one): each score split is a forward pass of its
    own (up to the layer on a long run), so *Why here?* is a closed box that computes nothing until opened (a class
    of 300 opening the Head view at once paid one each); opened, it draws the same terms."""
    from mha_viz.circuits import score_terms

    if long:
        monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    split = []
    real = score_terms.plan_qk_terms  # what the page plans, then runs
    monkeypatch.setattr(score_terms, "plan_qk_terms", lambda *a, **k: split.append(a[2:6]) or real(*a, **k))
    at = start_app()
    at.selectbox(key="model_choice").set_value("toy-induction").run()
    at.text_area(key="text").input(TEXT + (" o" if long else " p")).run()  # a text of its own: nothing split yet
    open_page(at, "head_view")
    at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(1).run()
    at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(1).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert at.session_state[keys.CURRENT].run.is_dense is not long
    assert not at.session_state[head_view_keys.WHY_OPEN] and not split  # closed, nothing split
    assert shared_controls.WHY_QUERY not in [w.key for w in at.selectbox]
    open_box(at, head_view_keys.WHY_OPEN)  # the user opens it
    assert not at.error, [e.value for e in at.error]
    at.selectbox(key=shared_controls.WHY_QUERY).set_value(10).run()
    at.selectbox(key=shared_controls.WHY_KEY).set_value(3).run()
    assert split and split[-1] == (1, 1, 10, 3)
    want = mha_viz.circuits.qk_terms(toy, TEXT + (" o" if long else " p"), 1, 1, 10, 3)
    np.testing.assert_allclose(np.array(_terms_chart(at)["data"][0]["z"], dtype=float), want.top(15)[2], atol=1e-6)


def test_a_link_that_names_its_cell_opens_it():
    """A shared link or a lesson step that names *Why here?*'s cell opens the box on that cell (closed otherwise)."""
    at = app_test()
    at.query_params.update({"model": "toy-induction", "text": TEXT, "layer": "1", "head": "1", "why_query": "10",
                            "why_key": "3"})
    at.run()
    open_page(at, "head_view")
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    assert at.session_state[head_view_keys.WHY_OPEN]
    assert (at.selectbox(key=shared_controls.WHY_QUERY).value, at.selectbox(key=shared_controls.WHY_KEY).value) == (
        10, 3)
    assert _terms_chart(at)
