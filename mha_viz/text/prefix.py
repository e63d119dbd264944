"""The part of a long text that a token cap reads: the shortest prefix, grown geometrically,
whose tokens up to the cap are certainly those of the whole text.

Tokenizing a 1 MB paste takes about half a second on 2 cores, and the app reads at most a few
thousand tokens of it. A tokenizer's pre-tokenizer splits text into words, and a word's tokens
depend only on that word; where the prefix ends in the middle of a word (or a run of spaces,
or a special token's text), only the last words can differ from the whole text's. `read`
keeps a prefix's tokens up to the last two words and at least MARGIN_CHARS (or the longest
added token) before the cut, and grows the prefix until more than the cap are kept that way.
Tokenizers that do not report words (slow tokenizers) and texts the cap reads whole are read
whole. `tests/models/test_text_prefix.py` checks the ids against the whole text's, on planted
cuts and generated texts, for a WordPiece and a byte-level BPE tokenizer;
`tests/models/test_text_prefix_slow.py` for a slow (Python) WordPiece tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from mha_viz.text.encode import encode

FIRST_CHARS_PER_TOKEN = 8  # the first prefix: 8 characters per token of the cap (English: 4-5)
GROWTH = 4  # each prefix 4 × the last: the prefixes read add up to at most 4/3 of the last
MARGIN_CHARS = 32  # tokens ending this close to the cut are not trusted
DROPPED_WORDS = 2  # the words at the cut that are not trusted
NO_WORD_CHARS = 65_536  # a prefix this long with nothing settled (one huge word): read the whole text
SAMPLES, SAMPLE_CHARS = 32, 2048  # the estimate of a long text's count reads these (64k characters, ~30 ms)


@dataclass(frozen=True)
class Prefix:
    """text: the prefix read (the whole text when `covers_text`); settled: how many of its
    tokens (no special tokens added) are certainly the whole text's first tokens; tokens:
    how many it has in all (for the estimate)."""

    text: str
    settled: int
    tokens: int
    whole_chars: int

    @property
    def covers_text(self) -> bool:
        return len(self.text) >= self.whole_chars


def estimate_total(tokenizer, text: str, cut: Prefix, specials: int) -> int:
    """The tokens of the whole `text` (with `specials` added), estimated from the tokens per character
    of SAMPLES pieces spread evenly over the whole text (`density`: a text's density changes along it,
    prose, then a table, then code), rounded to 3 significant digits; never fewer than are known to be
    there. The pieces do not depend on the cap that read the prefix `cut`, so every page (each under
    its own cap) says the same number for the same text."""
    guess = round(density(tokenizer, text) * len(text)) + specials
    digits = max(len(str(guess)) - 3, 0)
    return max(round(guess, -digits), cut.settled + specials + 1)


@lru_cache(maxsize=8)  # pages ask again on each rerun; a tokenizer is hashed by identity
def density(tokenizer, text: str) -> float:
    """Tokens per character of `text`, from SAMPLES pieces of SAMPLE_CHARS characters spread evenly over
    it (the first at its start)."""
    step = max((len(text) - SAMPLE_CHARS) // max(SAMPLES - 1, 1), 1)
    pieces = [text[start:start + SAMPLE_CHARS] for start in range(0, len(text), step)][:SAMPLES]
    # one piece per call: a batch would start the tokenizer's thread pool in the app's process
    counts = [len(encode(tokenizer, piece, add_special_tokens=False)["input_ids"]) for piece in pieces]
    return sum(counts) / max(sum(map(len, pieces)), 1)


def read(tokenizer, text: str, limit: int, *, first_chars: int | None = None) -> Prefix:
    """The shortest prefix of `text` (first `first_chars` characters, default
    FIRST_CHARS_PER_TOKEN × `limit`, then GROWTH × more each time) whose first settled tokens
    number more than `limit`; `text` itself when none shorter does, or when NO_WORD_CHARS
    characters settle nothing."""
    size = max(int(first_chars or FIRST_CHARS_PER_TOKEN * limit), 1)
    if not getattr(tokenizer, "is_fast", False):  # no word boundaries to trust: read it all
        size = len(text)
    while size < len(text):
        part = text[:size]
        tokens, kept = settle(tokenizer, part)
        if kept > limit:
            return Prefix(part, kept, tokens, len(text))
        if not kept and size >= NO_WORD_CHARS:  # no word ends here: more prefixes would only add to the whole
            break
        size *= GROWTH
    return Prefix(text, 0, 0, len(text))


def settle(tokenizer, part: str) -> tuple[int, int]:
    """(how many tokens `part` has without special tokens, how many of the first are those of
    any text that starts with `part`). Needs a fast tokenizer (word ids and offsets)."""
    enc = encode(tokenizer, part, add_special_tokens=False, return_offsets_mapping=True)
    added = getattr(tokenizer, "added_tokens_decoder", {}).values()
    margin = max([MARGIN_CHARS] + [len(str(t)) for t in added])  # a special token's text cut short
    return len(enc["input_ids"]), _settled(enc.word_ids(), enc["offset_mapping"], len(part) - margin)


def _settled(word_ids: list, offsets: list, last_char: int) -> int:
    """How many leading tokens are neither in the last DROPPED_WORDS words nor end after
    `last_char` (a token outside any word, word id None, counts as a word of its own)."""
    groups, last = [], object()
    for i, w in enumerate(word_ids):
        if w is None or w != last:
            groups.append(i)  # where each word starts
        last = w
    stop = groups[-DROPPED_WORDS] if len(groups) >= DROPPED_WORDS else 0
    for i in range(stop):
        if offsets[i][1] > last_char:
            return i
    return stop
