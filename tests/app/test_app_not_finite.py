"""A run that comes out NaN or infinite (issue 38): the page says so in the precision the model
computed in, with what to choose instead, instead of drawing NaN as background; no traceback on the
page (it goes to the log), the sidebar's text and precision stay, and the last good result stays."""

from __future__ import annotations

import logging

import pytest

import mha_viz
import mha_viz_models
from mha_viz.ui.kit import keys
from tests.app.helpers import charts, shown, start_app

pytestmark = pytest.mark.model


def test_a_run_that_is_not_finite_says_what_to_do_and_keeps_the_inputs(monkeypatch, caplog):
    at = start_app()
    at.radio(key=keys.PRECISION).set_value("float16").run()
    assert not at.exception and not at.error
    assert at.session_state[keys.CURRENT].run.precision == "float16"
    real = mha_viz_models.as_probabilities

    def nan_layers(probs):  # every layer's probabilities as the capture reads them: NaN
        return real(probs) * float("nan")

    monkeypatch.setattr(mha_viz_models, "as_probabilities", nan_layers)
    text = "A sentence whose attention goes bad."
    caplog.set_level(logging.ERROR, logger="mha_viz")
    at.text_area(key=keys.TEXT).input(text).run()
    assert not at.exception
    errors = [shown(e.value) for e in at.error]
    assert any("attention in layer 0 of" in e and "not finite (NaN or infinity) in float16" in e
               and "Choose bfloat16 (float32's range) or float32 under Precision" in e for e in errors), errors
    assert not any("Traceback" in e for e in errors)
    logged = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], mha_viz.capture.NotFiniteError)]
    assert logged and logged[0].exc_info[2] is not None  # the traceback, in the log
    assert at.text_area(key=keys.TEXT).value == text and at.radio(key=keys.PRECISION).value == "float16"
    assert any("last successful result" in c.value for c in at.caption) and charts(at)
