"""The *Heads behind a prediction* page in a real browser, on smollm2: the IOI preset (names swapped)
estimated first, then patched in full on request, the logit difference the model really has (+6.1
for " Mary" over " John"), the estimate against real patching, and a click on a head of the
restored-fraction grid opening that head's panel."""

from __future__ import annotations

import re

import pytest

from mha_viz.interventions import prediction

pytestmark = [pytest.mark.e2e, pytest.mark.model]
MAIN = "[data-testid=stMain]"
# the screen position of the cell (head, layer) of a layers × heads grid
CELL = """(el, [x, y]) => {
    const gd = el.querySelector('.js-plotly-plot');
    const fl = gd._fullLayout, box = gd.getBoundingClientRect();
    return [box.left + fl._size.l + fl.xaxis.l2p(x), box.top + fl._size.t + fl.yaxis.l2p(y)];
}"""



def test_ioi_preset_on_smollm2_then_open_a_head(shared_app):
    app = shared_app
    app.choose_model("smollm2")
    app.goto("Heads behind a prediction")
    assert app.heading() == "Heads behind a prediction"
    app.choose("Preset", prediction.IOI.name, scope=MAIN)
    assert app.text_box.input_value() == prediction.IOI.clean  # the preset wrote the sidebar's text
    app.click(app.page.locator(MAIN).get_by_role("button", name="Find the heads", exact=True))
    app.page.locator("[data-testid=stAlertContentSuccess]").filter(has_text="m = logit").wait_for(timeout=300_000)
    app.wait_idle()
    [summary] = [s for s in app.alerts("Success") if "m = logit" in s]
    clean = float(re.search(r"([+−-]\d+\.\d+) on the clean text", summary).group(1).replace("−", "-"))
    corrupted = float(re.search(r"([+−-]\d+\.\d+) on the corrupted one", summary).group(1).replace("−", "-"))
    assert "' Mary'" in summary and "' John'" in summary
    assert clean == pytest.approx(6.1, abs=0.1) and corrupted == pytest.approx(-5.5, abs=0.1)
    assert app.titled("Estimated restored fraction") is not None
    assert app.titled("Direct logit attribution") is not None
    assert app.titled("Restored fraction") is None  # real patching waits for its button
    app.click(app.page.locator(MAIN).get_by_role("button", name="Patch every head for real", exact=True))
    app.page.locator("[data-testid=stAlertContentInfo]").filter(has_text="Estimate against real patching").wait_for(
        timeout=300_000)
    app.wait_idle()
    [versus] = [s for s in app.alerts("Info") if "Estimate against real patching" in s]
    pearson = float(re.search(r"Pearson r = (-?\d\.\d+)", versus).group(1))
    assert pearson >= 0.9  # the target on this pair
    restored = app.titled("Restored fraction")
    assert restored is not None and app.titled("Estimate against real patching") is not None
    app.shot("grids")

    restored.scroll_into_view_if_needed()
    x, y = restored.evaluate(CELL, [3, 23])  # head 3 of layer 23: the largest direct effect on this pair
    app.rerun(lambda: app.page.mouse.click(x, y))
    layer = app.page.locator(f"{MAIN} input[role=combobox][aria-label='Layer']")
    assert app.wait_until(lambda: layer.input_value(), "23") == "23"
    app.wait_idle()
    titles = [app.chart_title(i) for i in range(app.charts().count())]
    # clean, corrupted, value-weighted, its tokens, patching by position
    assert sum(t.startswith("Layer 23, head 3") for t in titles) == 5, titles
    assert any("promotes and suppresses" in t for t in titles), titles
    app.shot("head-23-3")
    app.assert_clean()


def test_cancel_stops_real_patching_and_keeps_the_estimate_and_the_inputs(shared_app):
    app = shared_app
    app.choose_model("smollm2")
    app.goto("Heads behind a prediction")
    if app.page.locator(f"{MAIN} input[role=combobox][aria-label='Preset']").input_value() != prediction.IOI.name:
        app.choose("Preset", prediction.IOI.name, scope=MAIN)
    wrong = app.page.locator(f"{MAIN} input[aria-label='Wrong token']")
    wrong.fill(" Bob")  # a new pair to patch (the preset's result may be kept from before)
    app.rerun(lambda: wrong.press("Enter"))
    app.click(app.page.locator(MAIN).get_by_role("button", name="Find the heads", exact=True))
    app.page.locator("[data-testid=stAlertContentSuccess]").filter(has_text="' Bob'").wait_for(timeout=300_000)
    app.wait_idle()
    app.page.locator(MAIN).get_by_role("button", name="Patch every head for real", exact=True).click()
    app.page.locator(f"{MAIN} [data-testid=stProgress]").filter(has_text="Patched layer").wait_for(timeout=120_000)
    # the live one: while a run is under way, Streamlit still shows the last run's greyed-out one
    app.click(app.page.locator(MAIN).get_by_role("button", name="Cancel", exact=True).and_(
        app.page.locator("button:not([disabled])")))
    app.page.locator("[data-testid=stAlertContentWarning]").filter(has_text="Patching was cancelled").wait_for()
    app.wait_idle()
    assert app.titled("Restored fraction") is None  # nothing of the real patching was kept …
    assert app.titled("Estimated restored fraction") is not None  # … and the estimate stays
    assert wrong.input_value() == " Bob" and app.text_box.input_value() == prediction.IOI.clean
    assert app.page.locator(MAIN).get_by_role("button", name="Patch every head for real", exact=True).is_enabled()
    app.assert_clean()
