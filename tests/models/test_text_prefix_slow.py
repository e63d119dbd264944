"""The slow-tokenizer path of `mha_viz.text.prefix`: a tokenizer without the fast backend reports
no words or offsets, so `read` must read the whole text, and `tokenize` must give the whole text's
ids through the tokenizer's own truncation. Checked on MiniLM's vocabulary as a Python WordPiece
tokenizer (`BertTokenizerLegacy`), on the planted hard cases of test_text_prefix.py and on long
prose that the fast tokenizer's prefix does cut; the ids are compared with the whole text's
tokens cut by hand ([CLS], the first limit − 2, [SEP]) and, on prose, with the fast tokenizer's."""

from __future__ import annotations

import dataclasses

import pytest
from transformers import BertTokenizerLegacy

import mha_viz
from mha_viz.text import prefix as text_prefix
from mha_viz_models.loading.bundled import BUNDLED
from tests.text_samples import HARD, PROSE, docs_prose

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def slow():
    tokenizer = BertTokenizerLegacy(vocab_file=str(BUNDLED["minilm"].locate() / "vocab.txt"))
    assert not tokenizer.is_fast
    return tokenizer


@pytest.fixture(scope="module")
def slow_model(minilm, slow):
    """MiniLM with the slow tokenizer in place of its own."""
    return dataclasses.replace(minilm, tokenizer=slow)


def by_hand(tokenizer, text: str, limit: int) -> list[int]:
    """The whole text's tokens, cut to `limit` with [CLS] first and [SEP] last, without the
    tokenizer's truncation."""
    body = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [tokenizer.cls_token_id, *body[:limit - 2], tokenizer.sep_token_id]


@pytest.mark.parametrize("case", sorted(HARD))
def test_a_slow_tokenizer_gives_the_whole_texts_ids(slow_model, slow, case):
    text = HARD[case]
    whole = len(slow(text)["input_ids"])
    for limit in (3, 8, 40):
        for first_chars in (None, 1, 31, 173):  # however short the first prefix, a slow tokenizer reads all
            assert text_prefix.read(slow, text, limit, first_chars=first_chars).covers_text
        toks = mha_viz.tokenize(slow_model, text, limit)
        assert toks.ids == by_hand(slow, text, limit), (case, limit)
        assert toks.total == whole and not toks.total_is_estimate
        assert toks.raw == slow.convert_ids_to_tokens(toks.ids)


@pytest.mark.parametrize("chars", [5_000, 200_000])  # counted, then past EXACT_COUNT_CHARS
def test_long_prose_the_fast_tokenizer_cuts_reads_whole_and_right(slow_model, slow, minilm, chars):
    text = docs_prose(chars)
    for limit in (16, 256):
        assert not text_prefix.read(minilm.tokenizer, text, limit).covers_text  # the fast path cuts here
        toks = mha_viz.tokenize(slow_model, text, limit)
        assert toks.n == limit and toks.truncated
        assert toks.ids == by_hand(slow, text, limit)
        assert toks.ids == mha_viz.tokenize(minilm, text, limit).ids  # the same vocabulary, fast
        assert toks.total == len(slow(text)["input_ids"]) and not toks.total_is_estimate


def test_a_text_that_fits_is_read_whole(slow_model, slow):
    text = PROSE * 3
    toks = mha_viz.tokenize(slow_model, text, 512)
    assert toks.ids == slow(text)["input_ids"] and not toks.truncated
