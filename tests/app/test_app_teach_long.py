"""Teaching and Queries and keys at any length (issue 52): on a long run, with every head's array forbidden,
the steps show a window of 64 tokens anywhere in the text, each row's other keys folded into one column whose
probability is what those keys take together. The window's probabilities are the run's own rows, the folded
column is the rest of each row, and both pages read the same window."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.capture.head_rows import forbid_dense
from mha_viz.export import shared_controls
from mha_viz.features.qk import controls as qk_keys
from mha_viz.features.teaching import controls as teaching_keys
from mha_viz.ui.kit import keys
from tests.app.helpers import open_page, start_app, titled
from tests.helpers import ROOT

pytestmark = pytest.mark.model
N, START, LAYER, HEAD = 300, 150, 3, 4


def test_the_walkthrough_shows_a_window_anywhere_in_a_long_text(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")  # a long run at 300 tokens: the path of 8,192, in seconds
    text = " ".join([(ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()] * 2)
    with forbid_dense():
        at = start_app()
        at.selectbox(key="model_choice").set_value("smollm2").run()
        at.number_input(key="token_limit").set_value(N).run()
        at.text_area(key="text").input(text).run()
        run = at.session_state[keys.CURRENT].run
        assert run.n == N and not run.is_dense
        open_page(at, "teaching")
        assert at.slider(key=shared_controls.TEACH_START).max == N - 64
        at.slider(key=shared_controls.TEACH_START).set_value(START)
        at.selectbox(key=teaching_keys.TEACH_LAYER).set_value(LAYER)
        at.selectbox(key=teaching_keys.TEACH_HEAD).set_value(HEAD).run()
        at.button_group(key=teaching_keys.TEACH_PART).set_value("3–6 · Scores to probabilities").run()
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
        assert any(f"Tokens {START}–{START + 63} of {N}. Each row's {START} earlier keys" in c.value
                   for c in at.caption)
        probs = titled(at, "A: attention probabilities")["data"][0]
        assert probs["x"][0].startswith(f"⟨{START} earlier keys")  # the folded column first
        shown = np.array(probs["z"], dtype=float)
        shown = np.nan_to_num(shown)  # masked cells are blank
        rows = run.rows(LAYER, HEAD, START, START + 64)
        np.testing.assert_allclose(shown[:, 1:], rows[:, START:START + 64], atol=1e-6)
        np.testing.assert_allclose(shown[:, 0], rows.sum(1) - rows[:, START:START + 64].sum(1), atol=1e-6)
        assert shown[:, 0].min() > 0  # a decoder's row this far in gives its earlier keys some weight
        open_page(at, "qk")  # the same window: its query and key are tokens of it
        assert at.slider(key=shared_controls.TEACH_START).value == START
        assert at.selectbox(key=qk_keys.QK_I).format_func(0).startswith(f"{START}: ")
        assert not at.exception and not at.error
        assert not run.is_dense
