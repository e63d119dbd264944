"""A 1 MB paste into the sidebar's text box, through AppTest: no exception or error, the run is cut
to the token cap and says so with an estimated count near the exact one, the whole paste stays
in the box, and the views show the first tokens of the whole text (checked against the
tokenizer's own truncation of the whole text)."""

from __future__ import annotations

import re

import pytest

from mha_viz.ui.kit import keys
from tests.app.helpers import heatmap_tokens, open_page, start_app
from tests.text_samples import ESTIMATE_TOLERANCE, docs_prose

pytestmark = pytest.mark.model
MB = 1_000_000
CAP = 512  # MiniLM's positions, below the sidebar's default Token limit


def test_a_one_megabyte_paste_is_cut_to_the_cap_and_kept():
    text = docs_prose(MB)
    at = start_app()
    at.text_area(key=keys.TEXT).input(text).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.text_area(key=keys.TEXT).value == text  # nothing of the paste lost

    tokenizer = at.session_state[keys.CURRENT].model.tokenizer
    exact = len(tokenizer(text)["input_ids"])
    [said] = [m for w in at.warning if (m := re.search(
        rf"The text has about ([\d,]+) tokens; the first {CAP} were kept", w.value))]
    assert abs(int(said[1].replace(",", "")) - exact) <= ESTIMATE_TOLERANCE * exact, (said[1], exact)

    run = at.session_state[keys.CURRENT].run
    want = tokenizer(text, truncation=True, max_length=CAP)["input_ids"]  # the whole text, cut by the tokenizer
    assert run.n == CAP and run.truncated and run.num_input_tokens_is_estimate
    assert run.token_ids == want
    open_page(at, "head_view")
    assert not at.exception and not at.error
    labels = heatmap_tokens(at)  # the analysis is shown, on all the tokens kept (in blocks: "508–511: …")
    assert labels[0].startswith("0–") and labels[-1].split(":")[0].endswith(f"–{CAP - 1}"), labels[::40]
    assert at.text_area(key=keys.TEXT).value == text
