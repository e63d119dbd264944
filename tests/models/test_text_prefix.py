"""Only the part of a long text that the cap reads is tokenized (`mha_viz.text.prefix`): the ids,
display tokens, word ids and special mask must be exactly those of the whole text through the
tokenizer's own truncation, for MiniLM's WordPiece and SmolLM2's byte-level BPE, wherever the
prefix happens to end (planted hard cases, then generated texts); the whole text's count is
exact when it is counted and an estimate, labelled, within ESTIMATE_TOLERANCE on real prose."""

from __future__ import annotations

import importlib
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mha_viz
from mha_viz.text import prefix as text_prefix
from mha_viz.text.tokenize import label_ids
from tests.text_samples import ESTIMATE_TOLERANCE, HARD, PROSE, docs_prose

pytestmark = pytest.mark.model
MODELS = ("minilm", "smollm2")
def _model(request, name):
    return request.getfixturevalue(name)


@lru_cache(maxsize=64)
def _whole(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def reference(tokenizer, text: str, limit: int) -> list[int]:
    """The independent computation: the whole text through the tokenizer's own truncation."""
    return tokenizer(text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"][:limit]


def check_prefix(tokenizer, text: str, limit: int, first_chars: int) -> bool:
    """The prefix `read` chooses keeps, up to its settled count, the whole text's own tokens, and
    the prefix through the tokenizer's truncation gives the whole text's ids. Returns whether
    the prefix was shorter than the text."""
    cut = text_prefix.read(tokenizer, text, limit, first_chars=first_chars)
    if cut.covers_text:
        return False
    assert cut.settled > limit
    mine = tokenizer(cut.text, add_special_tokens=False)["input_ids"]
    assert mine[:cut.settled] == _whole(tokenizer, text)[:cut.settled], (text[:80], limit, first_chars, len(cut.text))
    ids = tokenizer(cut.text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"][:limit]
    assert ids == reference(tokenizer, text, limit), (text[:80], limit, first_chars, len(cut.text))
    return True


def check_settled(tokenizer, text: str, cut: int) -> int:
    """The tokens `settle` trusts in text[:cut] are the whole text's first tokens; returns how many."""
    tokens, settled = text_prefix.settle(tokenizer, text[:cut])
    mine = tokenizer(text[:cut], add_special_tokens=False)["input_ids"]
    assert tokens == len(mine) and settled <= tokens
    assert mine[:settled] == _whole(tokenizer, text)[:settled], (text[:80], cut, text[max(cut - 20, 0):cut])
    return settled


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("case", sorted(HARD))
def test_wherever_the_text_is_cut_the_settled_tokens_are_the_whole_texts(request, name, case):
    tokenizer = _model(request, name).tokenizer
    text = HARD[case]
    cuts = [*range(1, min(len(text), 600)), *range(600, len(text), 7)]  # every character, then every 7th
    settled = [check_settled(tokenizer, text, cut) for cut in cuts]
    assert max(settled) > 0


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("case", sorted(HARD))
def test_the_prefix_read_gives_the_whole_texts_ids(request, name, case):
    tokenizer = _model(request, name).tokenizer
    text = HARD[case]
    cuts = [check_prefix(tokenizer, text, limit, first_chars) for limit in (1, 2, 3, 8, 40)
            for first_chars in (1, 2, 3, 5, 9, 14, 22, 31, 47, 64, 100, 173)]
    assert any(cuts)  # not only texts read whole


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("case", sorted(HARD))
def test_tokenize_gives_the_whole_texts_tokens_and_labels(request, name, case):
    model = _model(request, name)
    text = HARD[case]
    for limit in (3, 8, 40):  # first prefix 8 × limit characters: shorter than every planted text
        toks = mha_viz.tokenize(model, text, limit)
        want = label_ids(model, reference(model.tokenizer, text, limit))
        assert toks.ids == want.ids
        assert (toks.display, toks.word_ids, toks.raw, toks.special) == (
            want.display, want.word_ids, want.raw, want.special)
        assert toks.total == len(model.tokenizer(text)["input_ids"]) and not toks.total_is_estimate


PIECES = st.sampled_from([
    " ", "  ", "\n", "\t", "\u00a0", "a", "the", "Cat", "naïve", "e\u0301", "'s", "'t", "don't", "1", "42",
    ".", ",", "!?", "-", "_", "<", "|", ">", "[SEP]", "[CLS]", "<|im_start|>", "<|endoftext|>", "[", "SE", "P]",
    "😀", "👨‍👩‍👧", "\u200d", "🏽", "雨", "東京", "한국", "x" * 120, "ab" * 30, " " * 50,
])


@pytest.mark.parametrize("name", MODELS)
def test_generated_texts_cut_anywhere_keep_the_whole_texts_tokens(request, name):
    tokenizer = _model(request, name).tokenizer
    cuts = []

    @settings(max_examples=150, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.lists(PIECES, min_size=30, max_size=150).map("".join), st.integers(1, 24), st.integers(1, 60),
           st.floats(0, 1))
    def check(text, limit, first_chars, where):
        cuts.append(check_settled(tokenizer, text, max(int(where * len(text)), 1)) > 0)
        check_prefix(tokenizer, text, limit, first_chars)

    check()
    assert sum(cuts) >= 50  # of 150: a third at least leave settled tokens to compare


@pytest.mark.parametrize("name", MODELS)
def test_a_word_longer_than_the_longest_prefix_is_read_whole(request, name):
    model = _model(request, name)
    text = "one " + "x" * (text_prefix.NO_WORD_CHARS + 5) + " two three"  # nothing settles in any prefix
    toks = mha_viz.tokenize(model, text, 3)
    assert toks.ids == reference(model.tokenizer, text, 3)
    assert toks.total == len(model.tokenizer(text)["input_ids"]) and not toks.total_is_estimate


def test_a_text_that_fits_reads_whole_and_counts_exactly(minilm):
    toks = mha_viz.tokenize(minilm, PROSE * 3, 512)
    assert toks.total == toks.n == len(minilm.tokenizer(PROSE * 3)["input_ids"])
    assert not toks.truncated and not toks.total_is_estimate


@pytest.mark.parametrize("name", MODELS)
def test_a_long_texts_count_is_an_estimate_labelled_as_one(request, name, monkeypatch):
    model = _model(request, name)
    text = docs_prose(200_000)
    exact = len(model.tokenizer(text)["input_ids"])
    for limit in (64, 512):
        toks = mha_viz.tokenize(model, text, limit)
        assert toks.ids == reference(model.tokenizer, text, limit)
        assert toks.total_is_estimate and toks.truncated
        assert abs(toks.total - exact) <= ESTIMATE_TOLERANCE * exact, (limit, toks.total, exact)
    assert mha_viz.analyze(model, text, max_tokens=64).num_input_tokens_is_estimate
    # up to here: counted
    monkeypatch.setattr(importlib.import_module("mha_viz.text.tokenize"), "EXACT_COUNT_CHARS", len(text))
    toks = mha_viz.tokenize(model, text, 64)
    assert toks.total == exact and not toks.total_is_estimate


@pytest.mark.parametrize("name", MODELS)
def test_one_estimate_whatever_cap_read_the_text(request, name):
    """The same long text is "about N tokens" on every page: the views' cap and the Whole text page's
    (whole_text) read different prefixes, and the estimate must not depend on which."""
    model = _model(request, name)
    text = docs_prose(200_000)
    totals = {limit: mha_viz.tokenize(model, text, limit).total for limit in (16, 128, 512)}
    totals["whole text"] = mha_viz.tokenize(model, text, whole_text=True).total
    assert len(set(totals.values())) == 1, totals
    exact = len(model.tokenizer(text)["input_ids"])
    assert abs(totals[16] - exact) <= ESTIMATE_TOLERANCE * exact, (totals, exact)


def test_an_estimate_reads_about_in_the_report(minilm):
    run = mha_viz.analyze(minilm, docs_prose(120_000), max_tokens=16)
    assert run.num_input_tokens_is_estimate
    html = mha_viz.html_report(run)
    assert f"The first 16 of the text's about {run.num_input_tokens:,} tokens" in html
