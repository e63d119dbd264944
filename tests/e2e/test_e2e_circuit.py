"""The *Circuit* section of *Heads behind a prediction* in a real browser, on toy-induction's preset: the
circuit found (EAP-IG), a click on an edge's dot path-patches that edge, and the value shown is the one
`path_patch` computes for it."""

from __future__ import annotations

import re

import pytest

import mha_viz
from mha_viz.interventions import prediction

pytestmark = [pytest.mark.e2e, pytest.mark.model]
MAIN = "[data-testid=stMain]"
EDGES = ("el => { const d = el.querySelector('.js-plotly-plot')._fullData; "
         "return [d.length - 1, d[d.length - 1].hovertext]; }")



def test_a_click_on_an_edge_patches_it_for_real(shared_app):
    app = shared_app
    app.choose_model("toy-induction")
    app.goto("Heads behind a prediction")
    app.choose("Preset", prediction.INDUCTION.name, scope=MAIN)
    app.click(app.page.locator(MAIN).get_by_role("button", name="Find the heads", exact=True))
    app.page.locator("[data-testid=stAlertContentSuccess]").filter(has_text="m = logit").wait_for(timeout=120_000)
    app.wait_idle()
    app.click(app.page.locator(MAIN).get_by_role("button", name="Find the circuit", exact=True))
    assert app.wait_until(lambda: app.titled("The top 30 edges (EAP-IG)") is not None, True, timeout_s=120)
    graph = app.titled("The top 30 edges (EAP-IG)")
    graph.scroll_into_view_if_needed()
    curve, labels = graph.evaluate(EDGES)
    index = 1  # the second strongest edge
    sender, receiver = re.match(r"(.+) → (\S+) ", labels[index]).groups()
    x, y = app.point(graph, index, curve=curve)
    app.rerun(lambda: app.page.mouse.click(x, y))
    box = app.page.locator("[data-testid=stAlertContentInfo]").filter(has_text="path-patched for real")
    box.wait_for(timeout=60_000)
    text = box.inner_text()
    assert f"{sender} → {receiver}" in text
    toy = mha_viz.load_model("toy-induction", device="cpu")
    want = mha_viz.path_patch(toy, prediction.INDUCTION.clean, prediction.INDUCTION.corrupted, sender, receiver)
    shown = float(re.search(r"for real ([+−-]\d+\.\d+)", text).group(1).replace("−", "-"))
    assert shown == pytest.approx(want, abs=1e-3)
    assert app.titled("Faithfulness of the top k edges") is not None
    graph.scroll_into_view_if_needed()
    app.shot("circuit")
    app.assert_clean()
