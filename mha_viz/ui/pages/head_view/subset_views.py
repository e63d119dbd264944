"""The head view's "chosen queries and keys" detail: a range (or a pick-list) of query tokens over
a range (or pick-list) of key tokens (e.g. the second sentence's queries over the first
sentence's keys), with sentence presets.

Only the chosen rows are read (`mha_viz.views.head_reads.cells`, equal to `detail.subset` of the dense
head); the figure is `mha_viz.drawing.heads.head_heatmap(rows=, cols=)`.
"""

from __future__ import annotations

import streamlit as st

from mha_viz.drawing import heads as head_figures
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.ui.kit import keys, page_controls, session
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


def _apply_preset(table: dict) -> None:
    choice = session.get(keys.SUBSET_PRESET)
    if choice in table:
        queries, keys_ = table[choice]
        session.put_all((head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS), (queries, keys_))
        session.put(head_view_keys.SUBSET_QUERY_LIST, list(range(*queries))[:MAX_AXIS])
        session.put(head_view_keys.SUBSET_KEY_LIST, list(range(*keys_))[:MAX_AXIS])


def _to_custom() -> None:
    session.put(keys.SUBSET_PRESET, CUSTOM)


def _valid(span, n: int) -> bool:
    return isinstance(span, (tuple, list)) and len(span) == 2 and 0 <= span[0] < span[1] <= n


def _axis(label: str, key: str, n: int) -> list[int]:
    start, stop = st.slider(label, 0, n, key=key, on_change=_to_custom,
                            help="Tokens start..stop−1 (the slider's ends), at full resolution.")
    stop = max(stop, start + 1)
    if stop > n:
        start, stop = n - 1, n
    if stop - start > MAX_AXIS:
        st.caption(f"{label}: the first {MAX_AXIS} of the {stop - start} chosen tokens are shown.")
        stop = start + MAX_AXIS
    return list(range(start, stop))


def _pick(label: str, key: str, tokens: list[str], fallback: list[int]) -> list[int]:
    """A pick-list of `i: token` (at most MAX_AXIS); the positions in text order."""
    n = len(tokens)
    picked = session.get(key)
    if not isinstance(picked, list) or not all(isinstance(i, int) and 0 <= i < n for i in picked):
        session.put(key, fallback)
    picked = st.multiselect(label, list(range(n)), key=key, format_func=lambda i: f"{i}: {tokens[i]}",
                            max_selections=MAX_AXIS, on_change=_to_custom, help="Type to search the tokens.")
    if not picked:
        st.caption(f"{label}: none picked, so the range below is shown.")
        return fallback
    return sorted(picked)


def subset_figure(run, layer: int, head: int, rescale: bool):
    """Draw the preset and the two ranges (or pick-lists); return the heatmap of the chosen
    queries × keys."""
    n = run.n
    this_run = (run.model_name, run.text, n)
    table = presets(run.tokens)
    fresh = session.get(head_view_keys.SUBSET_RUN) != this_run
    session.put(head_view_keys.SUBSET_RUN, this_run)
    default = (0, min(n, DEFAULT_SPAN))
    # a new run starts afresh, unless a link set them
    for key in (head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS):
        if (fresh and not page_controls.just_restored(key)) or not _valid(session.get(key), n):
            session.put(key, default)
    if fresh or session.get(keys.SUBSET_PRESET) not in (CUSTOM, *table):
        session.put(keys.SUBSET_PRESET, CUSTOM)
    for key in (head_view_keys.SUBSET_QUERY_LIST, head_view_keys.SUBSET_KEY_LIST):
        if fresh and not page_controls.just_restored(key):
            session.pop(key, None)
    st.selectbox("Preset", [CUSTOM, *table], key=keys.SUBSET_PRESET, on_change=_apply_preset, args=(table,),
                 help="Sentences end after a token ending in . ! or ?")
    pick = st.toggle("Pick tokens one by one", key=head_view_keys.SUBSET_PICK, persist_state=keys.KEEP,
                     help="Pick-lists of `i: token` on each axis instead of ranges.")
    cols = st.columns(2)
    if not pick:
        with cols[0]:
            rows = _axis("Queries (rows)", head_view_keys.SUBSET_QUERIES, n)
        with cols[1]:
            keep = _axis("Keys (columns)", head_view_keys.SUBSET_KEYS, n)
    else:
        spans = [session.get(k) for k in (head_view_keys.SUBSET_QUERIES, head_view_keys.SUBSET_KEYS)]
        ranges = [list(range(*s))[:MAX_AXIS] if _valid(s, n) else list(range(*default)) for s in spans]
        with cols[0]:
            rows = _pick("Queries (rows)", head_view_keys.SUBSET_QUERY_LIST, run.tokens, ranges[0])
        with cols[1]:
            keep = _pick("Keys (columns)", head_view_keys.SUBSET_KEY_LIST, run.tokens, ranges[1])
    return head_figures.head_heatmap(run, layer, head, rescale=rescale, rows=rows, cols=keep)
