"""The Head view's *chosen queries and keys*, as the session holds them: a range (or a pick-list) of query tokens
over a range (or pick-list) of key tokens, the sentence presets that set both (e.g. the second sentence's queries
over the first sentence's keys), and what a new run resets. Its page draws the widgets over these keys."""

from __future__ import annotations

from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.ui.kit import page_controls, session
from mha_viz.views import detail

MAX_AXIS = detail.FULL_DETAIL_TOKENS  # most tokens on either axis (every cell is sent)
DEFAULT_SPAN = 96
CUSTOM = "custom ranges"
MAX_PRESET_SENTENCES = 8


def presets(tokens: list[str]) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """{label: (query range, key range)}: all tokens, each sentence over itself, and each
    sentence's queries over the sentence before (and the reverse), for the first sentences."""
    n = len(tokens)
    out = {"all tokens": ((0, n), (0, n))}
    spans = detail.sentence_spans(tokens)[:MAX_PRESET_SENTENCES]
    if len(spans) < 2:
        return out
    for s, span in enumerate(spans, 1):
        out[f"sentence {s} × sentence {s}"] = (span, span)
        if s > 1:
            out[f"sentence {s}'s queries × sentence {s - 1}'s keys"] = (span, spans[s - 2])
            out[f"sentence {s - 1}'s queries × sentence {s}'s keys"] = (spans[s - 2], span)
    return out


def apply_preset(table: dict) -> None:
    """The preset picker's callback: its ranges and pick-lists set from `table` (`presets`)."""
    choice = session.get(head_view_keys.SUBSET_PRESET)
    if choice in table:
        queries, keys_ = table[choice]
        session.put_all((head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS), (queries, keys_))
        session.put(head_view_keys.SUBSET_QUERY_LIST, list(range(*queries))[:MAX_AXIS])
        session.put(head_view_keys.SUBSET_KEY_LIST, list(range(*keys_))[:MAX_AXIS])


def to_custom() -> None:
    """A range or a pick-list edited by hand: the picker says so."""
    session.put(head_view_keys.SUBSET_PRESET, CUSTOM)


def valid(span, n: int) -> bool:
    """Whether `span` is a range (start, stop) of a text of `n` tokens."""
    return isinstance(span, (tuple, list)) and len(span) == 2 and 0 <= span[0] < span[1] <= n


def prepare(run) -> tuple[dict, tuple[int, int]]:
    """The session made ready for `run` before the widgets are drawn: a new run starts afresh (unless a link set
    the ranges), a range that no longer fits is reset. Returns (the presets, the default range)."""
    n = run.n
    this_run = (run.model_name, run.text, n)
    table = presets(run.tokens)
    fresh = session.get(head_view_keys.SUBSET_RUN) != this_run
    session.put(head_view_keys.SUBSET_RUN, this_run)
    default = (0, min(n, DEFAULT_SPAN))
    for key in (head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS):
        if (fresh and not page_controls.just_restored(key)) or not valid(session.get(key), n):
            session.put(key, default)
    if fresh or session.get(head_view_keys.SUBSET_PRESET) not in (CUSTOM, *table):
        session.put(head_view_keys.SUBSET_PRESET, CUSTOM)
    for key in (head_view_keys.SUBSET_QUERY_LIST, head_view_keys.SUBSET_KEY_LIST):
        if fresh and not page_controls.just_restored(key):
            session.pop(key, None)
    return table, default
