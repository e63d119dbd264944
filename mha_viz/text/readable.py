"""Turn a tokenizer's pieces into tokens a person can read, and group word pieces into words.

Three marker schemes exist: byte-level BPE (GPT-2, Llama 3, SmolLM2: 'Ġ' is a space and each
character stands for a byte), WordPiece (BERT: '##' continues a word) and SentencePiece
('▁' starts a word, '<0x0A>' is a byte). Invisible or direction-changing characters are shown
as visible codes so a label can never hide or reorder its neighbours. A token's leading space is
shown as '␣' (SPACE): " Mary" and "Mary" are two tokens, and their labels differ ("␣Mary", "Mary").
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: the printable character that stands for each byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in chars.items()}


SPACE = "␣"  # a space, shown
_VISIBLE = {" ": SPACE, "\n": "⏎", "\t": "⇥", "\r": "␍"}


def spaced(text: str) -> str:
    """`text` with its leading spaces shown as SPACE ("  Mary" -> "␣␣Mary")."""
    rest = text.lstrip(" ")
    return SPACE * (len(text) - len(rest)) + rest


def bare(token: str) -> str:
    """A display token without the marks of its leading space ("␣Mary" -> "Mary"; "␣" stays): the
    word, for what reads the words (punctuation, word-by-word comparison) rather than shows them."""
    return token.lstrip(SPACE) or token


def visible(text: str) -> str:
    """Make whitespace-only tokens and invisible/format characters visible."""
    if text == "":
        return "∅"
    if text.strip() == "":
        return "".join(_VISIBLE.get(c, "␣") for c in text)
    out = []
    for c in text:
        cat = unicodedata.category(c)
        if c in "\n\t\r":
            out.append(_VISIBLE[c])
        elif cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(f"⟨U+{ord(c):04X}⟩")  # zero-width, bidi overrides, NUL, surrogates...
        else:
            out.append(c)
    return "".join(out)


def detect_scheme(tokenizer) -> str:
    """'bytelevel', 'wordpiece', 'wordlevel' (every token a word: toy-induction's letters) or
    'sentencepiece' (the default when nothing says otherwise)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if type(getattr(backend, "model", None)).__name__ == "WordLevel":
        return "wordlevel"
    described = repr(getattr(backend, "decoder", "")) + repr(getattr(backend, "pre_tokenizer", ""))
    if "ByteLevel" in described:
        return "bytelevel"
    if "WordPiece" in described or type(tokenizer).__name__.startswith(("Bert", "DistilBert")):
        return "wordpiece"
    return "sentencepiece"


def _clean_bytelevel(piece: str) -> tuple[str, bool]:
    dec = _byte_decoder()
    if not all(c in dec for c in piece):
        return piece, False
    raw = bytes(dec[c] for c in piece)
    starts = raw[:1] in (b" ", b"\n", b"\t")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # part of a multi-byte character (emoji, CJK): show its bytes
        head = raw.lstrip(b" ")
        text = " " * (len(raw) - len(head)) + "⟨" + " ".join(f"{b:02x}" for b in head) + "⟩"
    return spaced(text), starts


def _clean_sentencepiece(piece: str) -> tuple[str, bool]:
    if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
        value = int(piece[3:5], 16)
        return (chr(value) if value < 128 else f"⟨{value:02x}⟩"), False
    starts = piece.startswith("▁")
    return spaced(piece.replace("▁", " ")), starts


def clean_tokens(tokenizer, pieces: list[str], special: list[bool]) -> tuple[list[str], list[int]]:
    """Display tokens and a word index per token (special tokens are words of their own)."""
    scheme = detect_scheme(tokenizer)
    display: list[str] = []
    word_ids: list[int] = []
    word = -1
    for i, (piece, is_special) in enumerate(zip(pieces, special)):
        if is_special or scheme == "wordlevel":
            text, starts = piece, True
        elif scheme == "wordpiece":
            starts = not piece.startswith("##")
            text = piece[2:] if not starts and len(piece) > 2 else piece
        elif scheme == "bytelevel":
            text, starts = _clean_bytelevel(piece)
        else:
            text, starts = _clean_sentencepiece(piece)
        prev_special = i > 0 and special[i - 1]
        if starts or i == 0 or prev_special:
            word += 1
        display.append(visible(text))
        word_ids.append(word)
    return display, word_ids
