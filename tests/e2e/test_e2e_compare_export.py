"""Compare and export in a real browser.

- The Compare page on minilm, smollm2 and toy-induction: a minimal pair (two sentences) draws the
  change grid and the A | B | B − A panels; the same model with and without our MHA changes no
  head (the grid's colour bar stays near 0).
- Export: after choosing SVG in the sidebar, a chart's own camera button downloads an SVG drawn
  by the browser; the sidebar's *Attention data (.npz)* downloads the run the page shows
  (`AttentionRun.load` reads it back: same tokens, same attention as the test computes), and
  *HTML report* a file with the text's tokens and no external src or href.
"""

from __future__ import annotations

import re
import urllib.parse

import numpy as np
import pytest

import mha_viz

from .conftest import RUN_TIMEOUT_S, open_link

pytestmark = pytest.mark.e2e

PAIRS = {
    "minilm": ("The keys to the cabinet are missing.", "The keys to the cabinet is missing."),
    "smollm2": ("The keys to the cabinet are missing.", "The keys to the cabinet is missing."),
    "toy-induction": ("k d m x b f k d m x b f", "k d m x b f k d m x b q"),
}


def _open(browser, server: str, name: str, page: str, **params):
    return open_link(browser, server, name, f"/{page}?" + urllib.parse.urlencode(params))


def _grid_values(ui) -> np.ndarray:
    """The change grid's values, as Plotly holds them in the page."""
    z = ui.charts().nth(0).evaluate(  # _fullData: decoded (data[0].z is the base64 Plotly was sent)
        "el => Array.from(el.querySelector('.js-plotly-plot')._fullData[0].z, row => Array.from(row))")
    return np.asarray(z, dtype=float)


@pytest.mark.parametrize("model", list(PAIRS))
def test_compare_a_minimal_pair(browser, server, model):
    a, b = PAIRS[model]
    ui = _open(browser, server, f"compare-{model}", "compare", model=model, text=a)
    try:
        assert ui.heading() == "Compare texts or models"
        box = ui.page.locator("[data-testid=stMain] textarea").first
        ui.rerun(lambda: (box.fill(b), box.press("Control+Enter")))
        ui.wait_until(lambda: "token by token" in " ".join(ui.alerts("Info")), True, timeout_s=RUN_TIMEOUT_S)
        assert ui.charts().count() >= 2  # the change grid and the side-by-side panels
        change = _grid_values(ui)
        assert change.ndim == 2 and change.max() > 1e-4  # one token changed: some head moved
        panels = ui.charts().nth(1).evaluate(
            "el => el.querySelector('.js-plotly-plot').data.filter(t => t.type === 'heatmap').length")
        assert panels == 3
        ui.assert_clean()
        ui.shot("pair")
    finally:
        ui.close()


def test_our_mha_against_hugging_face_changes_no_head(browser, server):
    ui = _open(browser, server, "compare-mha", "compare", model="minilm", text=PAIRS["minilm"][0])
    try:
        ui.radio("Compare", "One sentence, two models")
        ui.wait_until(lambda: "token by token" in " ".join(ui.alerts("Info")), True, timeout_s=RUN_TIMEOUT_S)
        change = _grid_values(ui)
        assert change.shape == (6, 12) and change.max() < 1e-4
        ui.assert_clean()
    finally:
        ui.close()


def test_svg_from_the_chart_and_the_run_and_report_from_the_sidebar(browser, server, run_of, tmp_path):
    text = "Dogs chase cats in the garden."
    ui = _open(browser, server, "export", "head_view", model="minilm", text=text, layer="1", head="2")
    try:
        sidebar = ui.page.locator("[data-testid=stSidebar]")
        sidebar.locator("summary").filter(has_text="Export").click()
        ui.radio("Chart downloads", "SVG (vector, for papers)")
        chart = ui.charts().nth(0)
        chart.hover()
        camera = chart.locator(".modebar-btn[data-title^='Download plot']")
        with ui.page.expect_download() as got:
            camera.click()
        svg = got.value.path().read_text()
        assert got.value.suggested_filename.endswith(".svg") and "minilm" in got.value.suggested_filename
        assert svg.lstrip().startswith("<svg") and "Layer 1, head 2" in svg

        with ui.page.expect_download() as got:
            sidebar.get_by_role("button", name=re.compile("Attention data")).click()
        saved = tmp_path / "run.npz"
        got.value.save_as(saved)
        loaded = mha_viz.AttentionRun.load(saved)
        expected = run_of("minilm", text)
        assert loaded.tokens == expected.tokens and loaded.model_name == expected.model_name
        np.testing.assert_allclose(loaded.attentions, expected.attentions, atol=1e-5)

        with ui.page.expect_download() as got:
            sidebar.get_by_role("button", name=re.compile("HTML report")).click()
        html = got.value.path().read_text()
        assert all(f">{tok}<" in html for tok in ("garden", "chase"))
        assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*https?:""", html, re.I)
        ui.assert_clean()
    finally:
        ui.close()
