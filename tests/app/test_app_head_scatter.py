"""Every head on two measures on the Head metrics page, through AppTest: the points are the core's head table
(x, y and colour as chosen), the choices stay across pages, and heads a lasso picked open side by side on
Compare heads (the click itself is the browser's: tests/e2e/test_e2e_head_scatter.py)."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import metrics
from mha_viz.export import shared_controls
from mha_viz.features.head_metrics import controls as head_metrics_keys
from tests.app.helpers import chart_title, charts, open_page, open_with_text

pytestmark = pytest.mark.model
TEXT = "The keys to the old cabinet are missing. They were here."


def _scatter(at) -> dict:
    found = [c for c in charts(at) if chart_title(c).startswith("Every head:")]
    assert len(found) == 1, [chart_title(c) for c in charts(at)]
    return found[0]


def test_the_scatter_is_the_head_table_on_the_chosen_measures():
    at = open_with_text("head_metrics", TEXT)
    table = metrics.head_table(mha_viz.analyze(mha_viz.load_model("minilm", device="cpu"), TEXT, max_tokens=512))
    first = _scatter(at)
    np.testing.assert_allclose(np.asarray(first["data"][0]["x"], float), table["entropy"], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(first["data"][0]["y"], float), table["prev_token_score"], atol=1e-6)
    assert first["data"][0]["marker"]["color"] == list(table["layer"])
    at.selectbox(key=head_metrics_keys.SCATTER_X).set_value("induction_score").run()
    at.selectbox(key=head_metrics_keys.SCATTER_COLOUR).set_value("confidence").run()
    assert not at.exception
    chosen = _scatter(at)
    np.testing.assert_allclose(np.asarray(chosen["data"][0]["x"], float), table["induction_score"], atol=1e-6)
    np.testing.assert_allclose(np.asarray(chosen["data"][0]["marker"]["color"], float), table["confidence"],
                               atol=1e-6)
    assert "Induction score" in chart_title(chosen) and "Confidence" in chart_title(chosen)
    # the choice stays when the user comes back
    open_page(at, "model_view")
    open_page(at, "head_metrics")
    assert at.selectbox(key=head_metrics_keys.SCATTER_X).value == "induction_score"


def test_heads_a_lasso_picked_open_on_compare_heads():
    at = open_with_text("head_metrics", TEXT)
    assert head_metrics_keys.SCATTER_COMPARE not in [b.key for b in at.button]  # nothing picked: no button
    at.session_state[head_metrics_keys.SCATTER_PICKED] = ["L0H1", "L2H3", "L5H11", "L9H0"]
    at.run()  # as the lasso's callback keeps them; L9H0 is no head of MiniLM's 6 layers: left out
    button = at.button(key=head_metrics_keys.SCATTER_COMPARE)
    assert button.label == "Compare these 3 heads"
    button.click().run()
    assert not at.exception and at.title[0].value == "Compare heads"
    assert at.multiselect(key=shared_controls.COMPARE_HEADS).value == ["L0H1", "L2H3", "L5H11"]


def test_more_than_six_picked_compare_the_first_six():
    at = open_with_text("head_metrics", TEXT)
    picked = [f"L{layer}H{head}" for layer in range(2) for head in range(5)]
    at.session_state[head_metrics_keys.SCATTER_PICKED] = picked
    at.run()
    button = at.button(key=head_metrics_keys.SCATTER_COMPARE)
    assert button.label == "Compare the first 6 of these heads"
    button.click().run()
    assert at.multiselect(key=shared_controls.COMPARE_HEADS).value == picked[:6]
