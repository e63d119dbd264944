"""The sidebar's *Export* box: how charts download (format and size of Plotly's camera button),
and downloads of the current analysis: the run as `.npz` and a self-contained HTML report.

Files are made when the user clicks (Streamlit's deferred download data), never on a rerun. A long run
(`AttentionRun.is_dense` False) holds no every-head array to save: it offers its scan's own file instead
(`Scan.save`: the head table, thumbnails and each row's kept keys), and its report reads its thumbnails,
its table and the chosen heads only, never every head.
"""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from mha_viz import metrics
from mha_viz.budget.plan import Plan
from mha_viz.capture import head_rows
from mha_viz.drawing import style as figure_style
from mha_viz.export import downloads
from mha_viz.settings import size_text
from mha_viz.ui.kit import analysis, boxes, keys, plans, resources, seq2seq_views, session, shared_head
from mha_viz.ui.kit.text import plain

log = logging.getLogger("mha_viz.ui")
FORMATS = {"png": "PNG (image)", "svg": "SVG (vector, for papers)"}
MAX_REPORT_HEADS = 12  # each head is a heatmap in the report: the size limit holds with this many


def table_csv(table) -> bytes:
    """A table (DataFrame, or a dict of column -> values or of name -> value) as CSV bytes."""
    if isinstance(table, dict) and not any(isinstance(v, (list, tuple)) for v in table.values()):
        table = {"name": list(table), "value": list(table.values())}
    return pd.DataFrame(table).to_csv(index=False).encode()


def _head_options(run) -> list[tuple[int, int]]:
    return [(row, h) for row in range(run.num_layers) for h in range(run.num_heads)]


def _too_large(need) -> str | None:
    """Why a download that declares `need` could never be made on this server (more than a whole
    budget: its click would fail in the browser with no word), or None. Checked when the button is
    drawn, so that the sidebar says it instead."""
    slots = resources.slots()
    for place, nbytes in need.places().items():
        whole = slots.budget(place)
        if nbytes > whole:
            return f"needs about {size_text(nbytes)}, more than the {size_text(whole)} this server has for analyses"
    return None


def _report(run, model, heads) -> Plan[bytes]:
    """The report's plan, run on the click (`_on_click`) from the run as it is shown."""
    def table():
        try:
            return metrics.head_table(run, analysis.weights(model))
        except Exception:  # noqa: BLE001 - the report goes out without the table rather than not at all
            log.exception("head table for the report failed")
            return None

    def facts() -> dict:
        found = model.facts() if model is not None else {"model": run.model_name}
        found.pop("loaded from", None)  # a report is shared: this server's folders mean nothing to its readers
        return found
    return downloads.plan_report(run, heads, table=table, facts=facts)


def _on_click(plan: Plan[bytes]):
    """The deferred download: the file is made on the click, admitted in a server slot on its plan's need (waiting
    for one: the click runs outside the script, where no notice can be shown nor Streamlit's cache called)."""
    return lambda: plans.run_admitted(plan, wait=True)


def sidebar_box(cur) -> None:
    """The *Export* expander at the bottom of the sidebar: its inputs, files and head list are built and sent
    only while it is open (a run with it closed sends its label alone; its choices stay, `keys.KEEP`)."""
    box = boxes.lazy_box(st.sidebar, "Export", keys.EXPORT_OPEN, keys.EXPORT_WAS_OPEN, icon=":material/download:")
    if box.open:
        with box:
            _box(cur)


def _box(cur) -> None:
    st.radio("Chart downloads", list(FORMATS), key=keys.EXPORT_FORMAT, persist_state=keys.KEEP, format_func=FORMATS.get,
             horizontal=True,
             help="Every chart has a camera button (top right, when the pointer is over it): it downloads "
                  "the chart in this format, drawn by your browser.")
    st.selectbox("Size", list(figure_style.DOWNLOAD_SIZES), key=keys.EXPORT_SIZE, persist_state=keys.KEEP,
                 help="Publication sizes: a PNG 'paper, full width' is 2,100 px wide, 7 inches at 300 dpi.")
    run = cur.run
    if run is None:
        st.caption("Analyse a text to download its data and a report.")
        return
    if seq2seq_views.is_cross(run):
        st.caption("Cross-attention: its table downloads from Head metrics, every chart from its camera button. "
                   "Pick Encoder or Decoder (sidebar, *Attention*) to download that run and a report.")
        return
    stem = figure_style.safe_filename(f"{run.model_name.rsplit('/', 1)[-1]}-{run.n}-tokens"
                                      + ("-contributions" if run.lens else ""))
    st.caption(f"This analysis ({plain(run.model_name)}, {run.n} tokens"
               + (", as hidden in the sidebar" if run.hidden is not None else "")
               + (", as contributions (value-weighted)" if run.lens else "") + ")")
    if run.is_dense:
        _run_file(run, stem)
    else:
        _scan_file(run, stem)
    options = _head_options(run)
    chosen = [h for h in session.get(keys.EXPORT_HEADS, []) if tuple(h) in options]
    selected = shared_head.chosen_head()
    session.settle(keys.EXPORT_HEADS, [tuple(h) for h in chosen] or [selected if selected in options else (0, 0)])
    heads = st.multiselect("Heads in the report", options, key=keys.EXPORT_HEADS, persist_state=keys.KEEP,
                           max_selections=MAX_REPORT_HEADS,
                           format_func=lambda rh: f"layer {run.layer_ids[rh[0]]}, head {rh[1]}")
    made = _report(run, cur.model, [tuple(h) for h in heads])
    too_large = _too_large(made.need)
    if too_large:
        st.caption(f"The report {too_large}: lower the token limit to download it.")
    st.download_button("HTML report", data=_on_click(made),
                       file_name=f"{stem}-report.html", mime="text/html", on_click="ignore", key=keys.DL_REPORT,
                       icon=":material/description:", disabled=bool(too_large),
                       help="One file that opens offline in any browser: the model, the text, the overview of "
                            "every head, these heads and the metrics table.")


def _run_file(run, stem: str) -> None:
    """The dense run's `.npz` (`AttentionRun.save`): every head's attention, float16 when asked."""
    half = st.checkbox("float16 (half the size)", key=keys.EXPORT_HALF, persist_state=keys.KEEP,
                       help="The .npz file holds every head's attention; float16 keeps 3 decimals.")
    made = downloads.plan_npz(run, float16=half)
    too_large = _too_large(made.need)
    if too_large:
        st.caption(f"The .npz file {too_large}: lower the token limit to download it.")
    st.download_button("Attention data (.npz)", data=_on_click(made),
                       file_name=f"{stem}.npz", mime="application/octet-stream", on_click="ignore",
                       key=keys.DL_NPZ, icon=":material/data_array:", disabled=bool(too_large),
                       help="Open with mha_viz.AttentionRun.load(path), or numpy.load(path).")


def _scan_file(run, stem: str) -> None:
    """A long run's `.npz`: its scan (`Scan.save`), since every head's attention would take too much."""
    scan = run.summary
    st.caption(f"Every head's attention at {run.n} tokens would take "
               f"{size_text(head_rows.every_head_bytes(run.num_layers, run.num_heads, run.n))}: the data file holds "
               f"what the analysis kept instead (the head table, the thumbnails, each query's {scan.top_k} heaviest "
               f"keys of at least {scan.min_weight:g} and the rest of its weight).")
    made = downloads.plan_scan_file(run)
    too_large = _too_large(made.need)
    if too_large:
        st.caption(f"That file {too_large}: lower the token limit to download it.")
    st.download_button("Analysis data (.npz)", data=_on_click(made), file_name=f"{stem}-scan.npz",
                       mime="application/octet-stream", on_click="ignore", key=keys.DL_NPZ,
                       icon=":material/data_array:", disabled=bool(too_large),
                       help="Open with mha_viz.Scan.load(path, model) (the model recomputes exact rows), or "
                            "numpy.load(path).")
