"""Text → token ids under the token cap: the one door every text goes through to reach a model.

`tokenize(model, text, max_tokens)` returns a `Tokens` record cut to the smallest of: the
model's positions, the caller's `max_tokens`, the cap of the session it runs in (`session_cap`,
set by the app for each rerun from the sidebar's *Token limit*) and, on a public server, the
server's cap (`MHA_VIZ_MAX_TOKENS`). Capture, metrics, teaching, ablation, predictions and the
whole-text overview all call it, so a page that forgets to pass its cap still cannot run a
longer text. The whole-text overview reads past the session cap on purpose (`whole_text=True`);
on a public server it stops at `MHA_VIZ_MAX_OVERVIEW_TOKENS` (default: `MHA_VIZ_MAX_TOKENS`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from mha_viz import settings
from mha_viz.text import prefix as text_prefix
from mha_viz.text.encode import encode
from mha_viz.text.readable import clean_tokens
from mha_viz_models import LoadedModel

# Up to this many characters a truncated text's total is counted exactly (about 20 ms on 2 cores);
# past it, estimated from the prefix read.
EXACT_COUNT_CHARS = 50_000


class InputError(ValueError):
    """The text cannot be analysed; the message is written for the person who typed it."""


@dataclass(frozen=True)
class Tokens:
    """One text as a model reads it, after the cap.

    ids: the token ids the model runs on; total: how many the whole text has (before the cap;
    estimated from the part read when `total_is_estimate`, see `tokenize`);
    display: readable tokens (markers such as Ġ / ## / ▁ removed, invisible characters shown);
    word_ids: the word each token belongs to; raw: the tokenizer's own pieces;
    special: True for structural tokens ([CLS], [SEP], BOS…).
    """

    ids: list[int]
    total: int
    display: list[str]
    word_ids: list[int]
    raw: list[str]
    special: list[bool]
    total_is_estimate: bool = False  # `total` estimated from the part read (a long text)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def truncated(self) -> bool:
        return self.total > self.n


# The cap of the session this code runs in. Streamlit runs each rerun of a session in a thread
# of its own, and a new thread starts with an empty context: one session's cap never leaks into
# another's.
_SESSION_CAP: ContextVar[int | None] = ContextVar("mha_viz_session_cap", default=None)


@contextmanager
def session_cap(limit: int | None):
    """Every `tokenize` inside this block keeps at most `limit` tokens (None: no session cap)."""
    token = _SESSION_CAP.set(int(limit) if limit else None)
    try:
        yield
    finally:
        _SESSION_CAP.reset(token)


def token_limit(model: LoadedModel, max_tokens: int | None = None, *, whole_text: bool = False) -> int:
    """The most tokens one computation on this model may read: the model's positions, `max_tokens`,
    the session's cap (unless `whole_text`) and, in public mode, the server's cap (for
    `whole_text`, the overview's own)."""
    limits = [model.max_positions]
    if max_tokens:
        limits.append(int(max_tokens))
    if not whole_text and _SESSION_CAP.get():
        limits.append(_SESSION_CAP.get())
    conf = settings.from_env()
    if conf.public:
        limits.append(conf.max_overview_tokens if whole_text else conf.max_tokens)
    return max(1, min(limits))


def count_text(n: int, estimate: bool = False) -> str:
    """A text's token count as messages show it: "about 241,000" for an estimate, "602" otherwise."""
    return f"about {n:,}" if estimate else str(n)


def count_tokens(model: LoadedModel, text: str) -> int:
    """How many tokens the whole of `text` has for this model (runs nothing but the tokenizer, over
    the whole text: `tokenize(...).total` costs only the part the cap reads)."""
    return len(encode(model.tokenizer, text or "", add_special_tokens=True)["input_ids"])


# The texts tokenized last, whatever asked: the app asks again on every rerun of a session (the sidebar's run,
# its layers, a page's controls), and at 8,192 tokens one tokenize is about 0.3 s on 2 cores, mostly the readable
# labels. Keyed by what the result depends on: the tokenizer itself (held, so that its id is never another's), the
# text, the limit and EXACT_COUNT_CHARS.
RECENT_TEXTS = 32
_recent: OrderedDict[tuple, tuple[object, Tokens]] = OrderedDict()
_recent_lock = threading.Lock()


def _copy(tokens: Tokens) -> Tokens:
    """A Tokens whose lists are the caller's own (a caller that edits them edits no one else's)."""
    return replace(tokens, ids=list(tokens.ids), display=list(tokens.display), word_ids=list(tokens.word_ids),
                   raw=list(tokens.raw), special=list(tokens.special))


def tokenize(model: LoadedModel, text: str, max_tokens: int | None = None, *,
             whole_text: bool = False) -> Tokens:
    """`text` as token ids for `model`, cut to `token_limit(model, max_tokens, whole_text=...)`.

    The ids are those of the whole text through the tokenizer's own truncation (closing special
    tokens such as [SEP] kept), but only a prefix long enough for the limit is read
    (`text_prefix.read`). `total` is exact for a text of up to EXACT_COUNT_CHARS characters or one
    the prefix covers; for a longer one it is estimated from the prefix and samples of the rest,
    and `total_is_estimate` says so. Raises InputError for blank text or a text that gives no tokens.
    The last RECENT_TEXTS results are kept: the same text, tokenizer and limit again reads them.
    """
    if text is None or not text.strip():
        raise InputError("Type a sentence to see its attention.")
    limit = token_limit(model, max_tokens, whole_text=whole_text)
    key = (id(model.tokenizer), text, limit, EXACT_COUNT_CHARS)
    with _recent_lock:
        hit = _recent.get(key)
        if hit is not None and hit[0] is model.tokenizer:
            _recent.move_to_end(key)
            return _copy(hit[1])
    tokens = _tokenize(model, text, limit)
    with _recent_lock:
        _recent[key] = (model.tokenizer, tokens)
        while len(_recent) > RECENT_TEXTS:
            _recent.popitem(last=False)
    return _copy(tokens)


def _tokenize(model: LoadedModel, text: str, limit: int) -> Tokens:
    """`tokenize` itself, for a limit already worked out."""
    tokenizer = model.tokenizer
    cut = text_prefix.read(tokenizer, text, limit)
    if cut.covers_text:  # a short text: read whole, as it always was
        full = encode(tokenizer, text, add_special_tokens=True)["input_ids"]
        ids, total, estimate = full, len(full), False
        if len(full) > limit:  # truncation by the tokenizer keeps the closing special tokens ([SEP])
            ids = encode(tokenizer, text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]
    else:
        ids = encode(tokenizer, cut.text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]
        if len(text) <= EXACT_COUNT_CHARS:
            total, estimate = count_tokens(model, text), False
        else:
            specials = tokenizer.num_special_tokens_to_add(pair=False)
            total, estimate = text_prefix.estimate_total(tokenizer, text, cut, specials), True
    ids = ids[:limit]  # a tokenizer that ignores max_length still cannot pass the cap
    if not ids:
        raise InputError("The text produced no tokens for this model; type some words.")
    return label_ids(model, ids, total=total, total_is_estimate=estimate)


def structural_ids(model: LoadedModel) -> set[int]:
    """The ids the tokenizer adds around a text: [CLS], [SEP], BOS, EOS, padding. An unknown-character token is
    text, not structure."""
    tokenizer = model.tokenizer
    return set(getattr(tokenizer, "all_special_ids", None) or ()) - {getattr(tokenizer, "unk_token_id", None)}


def label_ids(model: LoadedModel, ids, *, total: int | None = None, total_is_estimate: bool = False) -> Tokens:
    """Token ids (a tokenized text, a generated sequence, a decoder's input) with their labels:
    readable tokens, words, the tokenizer's pieces and which are structural."""
    tokenizer = model.tokenizer
    ids = [int(i) for i in ids]
    structural = structural_ids(model)
    special = [i in structural for i in ids]
    raw = tokenizer.convert_ids_to_tokens(ids)
    display, word_ids = clean_tokens(tokenizer, raw, special)
    return Tokens(ids=ids, total=len(ids) if total is None else int(total), display=display, word_ids=word_ids,
                  raw=list(raw), special=special, total_is_estimate=bool(total_is_estimate))


UNKNOWN_SHARE = 0.2  # a run with at least this share of unknown tokens gets a notice in the app


def unknown_tokens(model: LoadedModel, ids) -> tuple[int, str | None]:
    """(how many of `ids` are the tokenizer's unknown token, that token's text); (0, None) for a
    tokenizer without one (byte-level BPE reads everything)."""
    tok = model.tokenizer
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return 0, None
    return sum(1 for i in ids if i == unk), getattr(tok, "unk_token", None)
