"""`mha_viz.tokenize` keeps its last results (`RECENT_TEXTS`): the app asks for the same text on every rerun,
and at 8,192 tokens one tokenize took about 0.3 s on 2 cores. The same text, tokenizer and limit again runs no
tokenizer and gives what a fresh tokenize gives; another limit, a session's cap or another tokenizer is
tokenized anew; a caller that edits what it got edits no one else's."""

from __future__ import annotations

import pytest

import mha_viz
from mha_viz.text import tokenize as tokenize_module
from tests.text_samples import PROSE

pytestmark = pytest.mark.model


@pytest.fixture
def encodes(monkeypatch):
    """How many times the tokenizer ran (every path of `tokenize` goes through `encode`)."""
    calls = []
    real = tokenize_module.encode

    def counted(*args, **kwargs):
        calls.append(args[1][:20])
        return real(*args, **kwargs)

    monkeypatch.setattr(tokenize_module, "encode", counted)
    return calls


def fresh(model, text, limit):
    """The independent computation: the tokenizer's own ids and pieces, through its truncation."""
    return model.tokenizer(text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"][:limit]


def test_the_same_text_again_runs_no_tokenizer_and_gives_the_same_tokens(minilm, encodes):
    text = PROSE + " (a text of this test's own)"
    first = mha_viz.tokenize(minilm, text, 40)
    ran = len(encodes)
    assert ran >= 1
    again = mha_viz.tokenize(minilm, text, 40)
    assert len(encodes) == ran  # read from the recent results
    assert again == first and again.ids == fresh(minilm, text, 40)
    assert again.raw == minilm.tokenizer.convert_ids_to_tokens(again.ids)


def test_another_limit_or_cap_or_tokenizer_is_tokenized_anew(minilm, smollm2, encodes):
    text = PROSE + " (another text of this test's own)"
    mha_viz.tokenize(minilm, text, 40)
    ran = len(encodes)
    shorter = mha_viz.tokenize(minilm, text, 24)
    assert len(encodes) > ran and shorter.ids == fresh(minilm, text, 24)
    ran = len(encodes)
    with mha_viz.text.session_cap(16):
        capped = mha_viz.tokenize(minilm, text, 40)
    assert len(encodes) > ran and capped.ids == fresh(minilm, text, 16)
    ran = len(encodes)
    other = mha_viz.tokenize(smollm2, text, 40)
    assert len(encodes) > ran and other.ids == fresh(smollm2, text, 40)


def test_a_caller_that_edits_its_tokens_edits_no_one_elses(minilm):
    text = PROSE + " (a third text of this test's own)"
    first = mha_viz.tokenize(minilm, text, 30)
    kept = (list(first.ids), list(first.display))
    first.ids.append(0)
    first.display[0] = "edited"
    again = mha_viz.tokenize(minilm, text, 30)
    assert (again.ids, again.display) == kept


def test_no_more_than_recent_texts_are_kept(minilm, encodes):
    texts = [f"{PROSE} (text {i} of this test)" for i in range(tokenize_module.RECENT_TEXTS + 1)]
    for text in texts:
        mha_viz.tokenize(minilm, text, 20)
    ran = len(encodes)
    mha_viz.tokenize(minilm, texts[-1], 20)  # the newest is kept
    assert len(encodes) == ran
    mha_viz.tokenize(minilm, texts[0], 20)  # the oldest went
    assert len(encodes) > ran
