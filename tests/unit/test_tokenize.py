"""The one door from text to token ids: `mha_viz.text.tokenize` and the caps it applies (the model's
positions, the caller's, the session's, the public server's, the overview's own), on the toy
model's letter tokenizer (no weights involved)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

import mha_viz
from mha_viz_models.toy.model import make_tokenizer

TEXT = " ".join("abcdefghijklmnopqrstuvwxyz" * 2)  # 52 letters: [BOS] + 52 = 53 tokens


@pytest.fixture()
def model():
    return SimpleNamespace(tokenizer=make_tokenizer(1000), max_positions=40, name="letters")


@pytest.fixture(autouse=True)
def _local(monkeypatch):
    for name in ("MHA_VIZ_PUBLIC", "MHA_VIZ_MAX_TOKENS", "MHA_VIZ_MAX_OVERVIEW_TOKENS"):
        monkeypatch.delenv(name, raising=False)


def test_the_record_describes_the_text(model):
    toks = mha_viz.tokenize(model, "a b c", 10)
    assert toks.ids == [0, 3, 4, 5] and toks.total == 4 and not toks.truncated
    assert toks.display == ["<bos>", "a", "b", "c"] and toks.raw == toks.display
    assert toks.special == [True, False, False, False] and toks.word_ids == [0, 1, 2, 3]


def test_the_smallest_cap_wins_and_the_total_is_kept(model):
    assert mha_viz.tokenize(model, TEXT).n == 40  # the model's positions
    toks = mha_viz.tokenize(model, TEXT, 12)
    assert toks.n == 12 and toks.total == 53 and toks.truncated
    assert toks.ids == mha_viz.tokenize(model, TEXT).ids[:12]  # the first tokens, in order


def test_the_session_cap_applies_to_callers_that_pass_none(model):
    with mha_viz.text.session_cap(7):
        assert mha_viz.tokenize(model, TEXT).n == 7
        assert mha_viz.tokenize(model, TEXT, 30).n == 7  # a caller cannot raise it
        assert mha_viz.tokenize(model, TEXT, 5).n == 5  # nor is a smaller one ignored
        assert mha_viz.tokenize(model, TEXT, whole_text=True).n == 40  # the overview reads past it
    assert mha_viz.tokenize(model, TEXT).n == 40  # gone after the block


def test_the_session_cap_stays_in_its_own_thread(model):
    seen = {}

    def other():
        seen["n"] = mha_viz.tokenize(model, TEXT).n

    with mha_viz.text.session_cap(7):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen["n"] == 40  # another session's thread does not inherit this session's cap


def test_a_public_server_caps_every_call_and_the_overview(model, monkeypatch):
    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    monkeypatch.setenv("MHA_VIZ_MAX_TOKENS", "9")
    assert mha_viz.tokenize(model, TEXT, 30).n == 9
    assert mha_viz.tokenize(model, TEXT, whole_text=True).n == 9  # the overview defaults to the cap
    monkeypatch.setenv("MHA_VIZ_MAX_OVERVIEW_TOKENS", "20")
    assert mha_viz.tokenize(model, TEXT, whole_text=True).n == 20
    assert mha_viz.tokenize(model, TEXT).n == 9


@pytest.mark.parametrize("text", ["", "   ", "\n\t", None])
def test_blank_text_is_an_input_error(model, text):
    with pytest.raises(mha_viz.InputError, match="Type a sentence"):
        mha_viz.tokenize(model, text)
