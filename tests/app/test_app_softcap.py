"""*Heads behind a prediction* on a model that soft-caps its logits (Gemma 2): the page attributes
rather than refuses, and says on the grid, in its caption and in the one-head panel that the
attribution is linearised through the cap."""

from __future__ import annotations

import re

import numpy as np
import pytest

import mha_viz
from mha_viz.export import shared_controls
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.interventions import attribution
from mha_viz.ui.kit import keys
from mha_viz.ui.shell.sidebar import OTHER
from tests.app.helpers import chart_title, charts, open_page, shown, start_app
from tests.helpers import save_peaked

pytestmark = pytest.mark.model

CLEAN, CORRUPTED = "one two three four five", "one two four three five"


def _gemma2(out) -> str:
    from transformers import Gemma2Config, Gemma2ForCausalLM
    return save_peaked(Gemma2ForCausalLM, Gemma2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, max_position_embeddings=128, sliding_window=8, final_logit_softcapping=1.0), out,
        jitter_norms=0.3, seed=11)


def test_a_soft_capped_model_is_attributed_and_the_page_says_it_is_linearised(tmp_path):
    folder = _gemma2(tmp_path / "gemma2")
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(OTHER).run()
    at.text_input(key=keys.MODEL_OTHER).input(folder).run()
    at.text_area(key=keys.TEXT).input(CLEAN).run()
    open_page(at, "prediction")
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(CORRUPTED).run()
    at.button(key=prediction_keys.PRED_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    model = mha_viz.load_model(folder, device="cpu")
    want = attribution.patch_heads(model, CLEAN, CORRUPTED)
    dla = attribution.direct_logit(model, CLEAN, want.answer, want.wrong)
    assert dla.linearised
    title = "Direct logit attribution (linearised through soft-capping) to"
    [grid] = [c for c in charts(at) if chart_title(c).startswith(title)]
    z = next(d["z"] for d in grid["data"] if d.get("type") == "heatmap")
    np.testing.assert_allclose(np.array(z, dtype=float), dla.per_head, atol=1e-5)
    said = shown(" ".join(m.value for m in [*at.success, *at.caption]))
    assert "direct writes (linearised through soft-capping) add" in said
    assert re.search(r"Direct logit attribution \(linearised through soft-capping\) [+-]\d", said)  # one-head panel
