"""The head the pages share: every page that shows one head (Head view, Head examples, Heads behind
a prediction, Compare, Generate, Teaching, Queries and keys) opens on it, and picking a head there
makes it the shared one, so the next page and the link (`links`) show the head on screen. A page that opens
on a head of its own (Compare: the one that changed most) makes that the shared head too, without choosing it.

It lives in the plain keys `SEL_LAYER` / `SEL_HEAD` (Streamlit drops a widget's state on pages that
do not draw it): a row of the sidebar's run (not the model's layer number when some layers are
captured) and a head. A page whose head comes from another run (a prediction's, a generation's, the
corpus examples' rows of the model's attention layers) passes that run's layer numbers: the head is
carried across by the model's layer number. Each page's pickers (`pick_head`) are widgets of their
own, set from the shared head before they are drawn, that write it back when the user picks.
"""

from __future__ import annotations

from typing import Sequence

import streamlit as st

from mha_viz.ui.kit import keys, session


def chosen_head() -> tuple[int, int]:
    """(layer row of the sidebar's run, head) the pages share (default the first)."""
    return int(session.get(keys.SEL_LAYER, 0)), int(session.get(keys.SEL_HEAD, 0))


def choose_head(row: int | None, head: int | None) -> None:
    """Make this the head the pages share (`row` a row of the sidebar's run); None leaves that
    part as it is. Something chose it (a picker, a click, a link, a result): `head_chosen`."""
    if row is not None:
        session.put(keys.SEL_LAYER, int(row))
    if head is not None:
        session.put(keys.SEL_HEAD, int(head))
    if (row, head) != (None, None):
        session.put(keys.SEL_CHOSEN, True)


def head_chosen() -> bool:
    """Whether anything has chosen a head in this session; until then the shared head is the first
    one and a page may open on a head of its own (Compare: the head that changed most)."""
    return bool(session.get(keys.SEL_CHOSEN))


def keep_head_valid(num_layers: int, num_heads: int) -> None:
    """The shared head within a run of this many layers and heads (a new model), chosen or not."""
    row, head = chosen_head()
    session.put_all((keys.SEL_LAYER, keys.SEL_HEAD), (min(row, num_layers - 1), min(head, num_heads - 1)))


def open_head(row: int, head: int) -> None:
    """Choose a head and open it in the head view (at the start of the next run)."""
    choose_head(row, head)
    session.put(keys.GOTO, "head_view")


def _shown_layers() -> list[int] | None:
    """The model layer numbers of the sidebar's run, by row (None before there is one)."""
    run = getattr(session.get(keys.CURRENT), "run", None)
    return list(run.layer_ids) if run is not None else None


def _sidebar_row(layer_ids: Sequence[int], row: int) -> int:
    """The sidebar's run's row of the model layer that is row `row` of a run whose rows are `layer_ids` (the same
    row when the sidebar's run lacks that layer)."""
    shown = _shown_layers()
    layer = layer_ids[row]
    return shown.index(layer) if shown is not None and layer in shown else row


def choose_head_in(layer_ids: Sequence[int], row: int, head: int) -> None:
    """Make head `head` of row `row` of a run whose rows are the model layers `layer_ids` the shared
    head (the sidebar's row of the same layer number; the same row when the sidebar's run lacks it)."""
    choose_head(_sidebar_row(layer_ids, row), head)


def head_in_run(layer_ids: Sequence[int], num_heads: int) -> tuple[int, int]:
    """The shared head in a run whose rows are the model layers `layer_ids`: (row, head), the row
    of the same layer number (the nearest row when that run lacks it)."""
    (row, head), shown = chosen_head(), _shown_layers()
    if shown is not None and 0 <= row < len(shown) and shown[row] in layer_ids:
        row = list(layer_ids).index(shown[row])
    return max(0, min(row, len(layer_ids) - 1)), max(0, min(head, num_heads - 1))


def _picked(layer_key: str, head_key: str, layer_ids: tuple[int, ...]) -> None:
    choose_head_in(layer_ids, int(session.need(layer_key)), int(session.need(head_key)))


def pick_head(layer_ids: Sequence[int], num_heads: int, layer_key: str, head_key: str, *,
              where=None, opening: tuple[int, int] | None = None) -> tuple[int, int]:
    """The *Layer* and *Head* pickers of a run whose rows are the model layers `layer_ids` (shown
    by layer number), in `where` (two containers; default: two columns), opened on the shared head
    (on `opening`, (row, head) of that run, while no head has been chosen: then the shared head, not chosen) and
    writing it back when the user picks. Returns (row, head) picked."""
    ids = tuple(int(i) for i in layer_ids)
    # the widgets are not kept (keys.NOT_KEPT): the shared head is
    if opening is not None and not head_chosen():
        shared = opening
        # the head on screen is the shared one, not chosen: the link, a lesson step and the notebook carry it (they
        # carried the first head, and a student following the step saw another), and this page follows its own pick
        # until something chooses a head
        session.put_all((keys.SEL_LAYER, keys.SEL_HEAD), (_sidebar_row(ids, opening[0]), opening[1]))
    else:
        shared = head_in_run(ids, num_heads)
    session.settle(layer_key, shared[0])
    session.settle(head_key, shared[1])
    left, right = where or st.columns(2)
    args = (layer_key, head_key, ids)
    row = left.selectbox("Layer", list(range(len(ids))), key=layer_key, format_func=lambda r: str(ids[r]),
                         on_change=_picked, args=args)
    head = right.selectbox("Head", list(range(num_heads)), key=head_key, on_change=_picked, args=args)
    return int(row), int(head)
