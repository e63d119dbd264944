"""Issue 52's guard: on a long run every page of the app opens with building every head's array forbidden
(`head_rows.forbid_dense`): a page that asks for it fails here (the guard raises, the page shows an error).
Pages that compute on a click open on their controls; a measure that needs every head whole at once says
what it would cost or the length that fits, as a notice.

Twice, on SmolLM2's first six layers as a user's folder (tests/first_layers.py; its thirty layers took 68 CPU-s of
the suite at 4,096 tokens, most of it the analysis and Across layers' products, a layer at a time alike): at 256 tokens
made long by MHA_VIZ_DENSE_MB=0 (the long path's every branch in under a minute), and at 4,096 tokens, long by its
length (every head would hold 3.4 GiB, over the default 1 GiB; SmolLM2 whole 17 GiB: issue 52 asks the guard to open
every page there), where a page that reads more than the rows it draws shows too."""

from __future__ import annotations

import pytest

from mha_viz.capture.head_rows import every_head_bytes, forbid_dense
from mha_viz.settings import from_env
from mha_viz.ui.kit import keys
from mha_viz.ui.shell.sidebar import OTHER
from tests import first_layers
from tests.app.helpers import app_page_ids, open_page, start_app
from tests.helpers import ROOT

pytestmark = pytest.mark.model


@pytest.mark.parametrize("n", [256, 4096])
def test_every_page_opens_on_a_long_run_without_every_heads_array(monkeypatch, n):
    if n < 4096:
        monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")  # every analysis a long run, whatever its length
    sample = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()
    text = " ".join([sample] * 8)  # about 20,000 tokens of SmolLM2: cut to the limit
    folder = first_layers.folder("smollm2-6")
    with forbid_dense():
        at = start_app()
        at.selectbox(key="model_choice").set_value(OTHER).run()
        at.text_input(key="model_other").input(folder).run()
        at.number_input(key="token_limit").set_value(n).run()
        at.text_area(key="text").input(text).run()
        assert not at.exception, at.exception
        run = at.session_state[keys.CURRENT].run
        assert run.n == n and not run.is_dense, run
        assert run.num_layers == 6
        assert n < 4096 or every_head_bytes(run.num_layers, run.num_heads, run.n) > 3 * from_env().dense_bytes
        cut = [w.value for w in at.warning if "were kept" in w.value]  # counts written as the rest of the app does
        assert cut and f"the first {n:,} were kept (at most {n:,} tokens" in cut[0], cut
        for page in app_page_ids():
            open_page(at, page)
            assert not at.exception, (page, at.exception)
            assert not at.error, (page, [e.value for e in at.error])
        assert not run.is_dense  # no page built every head behind the guard's back
