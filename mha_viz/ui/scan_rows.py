"""The Whole text page's exact attention, recomputed from what the scan kept (`Scan.rows`): one query's whole
row over every key, at a level of detail (`whole_row`: more keys than bars, each bar the heaviest of its keys,
and the row's heaviest keys listed exactly), and a square window of queries and keys (`window`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz.figures import heads as head_figures
from mha_viz.figures import scan as scan_figures
from mha_viz.scan.row_detail import BARS, row_detail, top_keys
from mha_viz.ui import charts, keys, resources, session
from mha_viz.ui.text import plain

WINDOW_MAX = 256  # queries of the exact rows drawn at once
TOP_KEYS = 10  # the heaviest keys of a row listed exactly
OUT_OF_MEMORY = "Recomputing these rows needs more memory than is free: pick a smaller window."


def _rows(scan, row: int, head: int, start: int, stop: int):
    """The exact rows start … stop − 1, or None after an error shown on the page."""
    rows, error = resources.attempt(lambda: scan.rows(row, head, start, stop), what="Recomputing the rows",
                                    out_of_memory=OUT_OF_MEMORY)
    if error:
        st.error(plain(error), icon=":material/warning:")
        return None
    return rows


def whole_row(scan, row: int, head: int, query: int) -> None:
    """Query `query`'s exact row over every key (or the keys the slider keeps), a bar per run of keys."""
    st.markdown(f"**Exact row: query {query} over all {scan.n} keys**, recomputed from what the scan kept")
    last = scan.n - 1
    shown = session.get(keys.SCAN_ROW_KEYS)
    if not (isinstance(shown, (tuple, list)) and len(shown) == 2 and 0 <= shown[0] < shown[1] <= last):
        session.settle(keys.SCAN_ROW_KEYS, (0, last))  # the whole row; a range kept from a longer text is reset
    if last < 1:
        return
    first, final = st.slider("Keys shown (zoom in for every key)", 0, last, key=keys.SCAN_ROW_KEYS,
                             persist_state=keys.KEEP,
                             help=f"At most {BARS} bars: where more keys are shown, each bar stands for a run of "
                                  "neighbouring keys and shows the heaviest of them.")
    rows = _rows(scan, row, head, query, query + 1)
    if rows is None:
        return
    weights = rows[0]
    detail = row_detail(weights, int(first), int(final) + 1)
    charts.show(scan_figures.exact_row(scan, row, head, query, detail), key=keys.SCAN_ROW_CHART, name="exact-row")
    kept = scan.top(row, head)[1][query].sum()
    st.caption(f"The whole row sums to {float(weights.sum(dtype=np.float64)):.6f} over its {scan.n} keys; the keys "
               f"shown hold {float(detail.mass.sum()):.6f}"
               + (f", in {len(detail.mass)} bars of up to {detail.keys_per_bar} keys" if detail.keys_per_bar > 1
                  else ", each key its own bar")
               + f". The scan kept the heaviest keys of weight ≥ {scan.min_weight:g} ({float(kept):.3f} of the row).")
    order, top = top_keys(weights, TOP_KEYS)
    st.markdown(f"**The row's {len(order)} heaviest keys, exactly**")
    st.dataframe(pd.DataFrame({"key": order, "token": [scan.tokens[int(k)] for k in order], "weight": top,
                               "distance": query - order}), hide_index=True)


def window(scan, row: int, head: int) -> None:
    """The exact rows of a window of queries, drawn over the same keys (a square)."""
    st.markdown("**Exact attention for a window of queries**, recomputed from what the scan kept")
    left, right = st.columns(2)
    session.settle(keys.SCAN_WINDOW_AT, min(int(session.get(keys.SCAN_WINDOW_AT, 0)), max(0, scan.n - 2)))
    session.setdefault(keys.SCAN_WINDOW, 64)
    at = int(left.number_input("Window from query", 0, scan.n - 1, key=keys.SCAN_WINDOW_AT, persist_state=keys.KEEP))
    size = int(right.number_input("Window size", 2, WINDOW_MAX, key=keys.SCAN_WINDOW, persist_state=keys.KEEP))
    stop = min(scan.n, at + size)
    rows = _rows(scan, row, head, at, stop)
    if rows is None:
        return
    square = rows[:, at:stop]
    title = f"Layer {scan.layer_ids[row]}, head {head}: queries and keys {at} … {stop - 1}"
    fig = head_figures.matrix_image(np.ascontiguousarray(square), scan.tokens[at:stop], offset=at,
                                    zmax=float(max(square.max(), 1e-12)), title=title)
    charts.show(fig, key=keys.SCAN_WINDOW_CHART, name="window")
    outside = rows.sum(-1) - square.sum(-1)
    st.caption(f"Each row is exact; on average {float(outside.mean()):.3f} of a row's attention goes to keys "
               f"outside the window (most: query {at + int(outside.argmax())}, {float(outside.max()):.3f}): "
               "the exact row above shows one query's over every key.")
