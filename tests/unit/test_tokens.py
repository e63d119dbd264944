"""Display tokens: markers removed, bytes decoded, invisible characters made visible, a leading space
shown as "␣"."""

from __future__ import annotations

import pytest

from mha_viz.text.readable import bare, clean_tokens, visible


class _Fake:
    """A tokenizer stand-in with the class name that identifies its scheme."""

    def __init__(self, scheme):
        self.backend_tokenizer = type("B", (), {"decoder": scheme, "pre_tokenizer": None})()


def test_bytelevel_pieces_are_decoded_and_grouped_into_words():
    tok = _Fake("ByteLevel(add_prefix_space=True)")
    pieces = ["The", "Ġcat", "Ġsat", ".", "ĠðŁĺ", "Ģ", "Ġ", "Ċ"]
    display, words = clean_tokens(tok, pieces, [False] * len(pieces))
    assert display[:4] == ["The", "␣cat", "␣sat", "."]
    assert display[4].startswith("␣⟨f0 9f 98") and display[5] == "⟨80⟩"  # halves of one emoji
    assert display[6] == "␣" and display[7] == "⏎"
    assert words[:4] == [0, 1, 2, 2]  # "sat." is one word


def test_wordpiece_continuations_join_their_word():
    tok = _Fake("WordPiece(prefix=##)")
    pieces = ["[CLS]", "token", "##ization", "works", "[SEP]"]
    display, words = clean_tokens(tok, pieces, [True, False, False, False, True])
    assert display == ["[CLS]", "token", "ization", "works", "[SEP]"]
    assert words == [0, 1, 1, 2, 3]


def test_sentencepiece_markers_and_byte_fallback():
    tok = _Fake("Metaspace()")
    display, words = clean_tokens(tok, ["▁Hello", "▁wor", "ld", "<0x0A>"], [False] * 4)
    assert display == ["␣Hello", "␣wor", "ld", "⏎"]
    assert words == [0, 1, 1, 1]


@pytest.mark.parametrize("raw,shown", [
    ("\u200b", "⟨U+200B⟩"), ("a\u202eb", "a⟨U+202E⟩b"), ("x\x00", "x⟨U+0000⟩"), ("", "∅"), ("  ", "␣␣"),
])
def test_invisible_characters_become_visible(raw, shown):
    assert visible(raw) == shown


def test_a_leading_space_tells_two_tokens_of_one_word_apart():
    """GPT-2's byte-level BPE (a tokenizer trained here) reads "The" at the start and " The" later
    as two tokens: their labels differ, and the one with the space shows it."""
    from tests.helpers import byte_bpe_tokenizer

    tok = byte_bpe_tokenizer()
    ids = tok("The dog sat on the mat. The cat sat")["input_ids"]
    pieces = tok.convert_ids_to_tokens(ids)
    display, words = clean_tokens(tok, pieces, [False] * len(ids))
    decoded = [tok.decode([i]) for i in ids]  # the tokenizer's own text of each token
    the = [k for k, text in enumerate(decoded) if text.strip() == "The"]
    assert len(the) == 2 and decoded[the[0]] == "The" and decoded[the[1]] == " The"
    assert ids[the[0]] != ids[the[1]]
    assert display[the[0]] == "The" and display[the[1]] == "␣The"
    assert [visible(text.replace(" ", "␣")) for text in decoded] == display  # every token, by its own text
    assert [bare(t) for t in (display[the[0]], display[the[1]], "␣", "␣␣x")] == ["The", "The", "␣", "x"]


def test_whitespace_predictions_stay_apart():
    """Issue 90: a space, two spaces and a newline, all in one top 5, each read "␣". A predicted token is labelled as
    every token of the app is (`tokenize.label_ids`, Switch heads off's and Generate's top tokens alike): a word after
    a space keeps its mark (Switch heads off showed "mat" where Generate showed "␣mat"). Byte-level pieces: Ġ is a
    space, Ċ a newline, âĢĭ the bytes of U+200B."""
    from tests.helpers import byte_bpe_tokenizer

    pieces = ["Ġ", "ĠĠ", "Ċ", "ĠĊ", "ĠParis", "Paris", "ĠĠâĢĭx"]
    shown, _ = clean_tokens(byte_bpe_tokenizer(), pieces, [False] * len(pieces))
    assert shown == ["␣", "␣␣", "⏎", "␣⏎", "␣Paris", "Paris", "␣␣⟨U+200B⟩x"]
    assert len(set(shown[:4])) == 4
