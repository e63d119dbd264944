"""Issue 52's guard: on a long run every page of the app opens with building every head's array forbidden
(`head_rows.forbid_dense`): a page that asks for it fails here (the guard raises, the page shows an error).
Pages that compute on a click open on their controls; a measure that needs every head whole at once says
what it would cost or the length that fits, as a notice.

The run is long because MHA_VIZ_DENSE_MB=0 makes every run long, not because of its length: SmolLM2 at
N tokens takes the long path's every branch (scan, spilled queries and keys, no head outputs) as it would
at 8,192, in a fraction of the time (at 4,096 tokens this test took minutes)."""

from __future__ import annotations

import pytest

from mha_viz.capture.head_rows import forbid_dense
from mha_viz.ui import keys
from tests.app.helpers import app_page_ids, open_page, start_app
from tests.helpers import ROOT

pytestmark = pytest.mark.model
N = 256


def test_every_page_opens_on_a_long_run_without_every_heads_array(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")  # every analysis a long run, whatever its length
    text = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()  # longer than N: cut to the limit
    with forbid_dense():
        at = start_app()
        at.selectbox(key="model_choice").set_value("smollm2").run()
        at.number_input(key="token_limit").set_value(N).run()
        at.text_area(key="text").input(text).run()
        assert not at.exception, at.exception
        run = at.session_state[keys.CURRENT].run
        assert run.n == N and not run.is_dense, run
        for page in app_page_ids():
            open_page(at, page)
            assert not at.exception, (page, at.exception)
            assert not at.error, (page, [e.value for e in at.error])
        assert not run.is_dense  # no page built every head behind the guard's back
