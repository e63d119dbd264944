"""*Open as notebook*: the view on screen as a Jupyter notebook that loads the same model with the same
options, computes what the page computed and draws the same figures (`mha_viz.export.notebook`).

A page records what it chose beyond the sidebar and the shared head (`record`, while it draws); the
frame offers the button once the page has drawn (`offer_notebook`). The notebook is written when the user
clicks (Streamlit's deferred download data), never on a rerun."""

from __future__ import annotations

import streamlit as st

import mha_viz
from mha_viz.drawing import style as figure_style
from mha_viz.export import notebook
from mha_viz.ui.kit import keys, seq2seq_views, session, shared_head
from mha_viz.ui.shell import sidebar


def record(**options) -> None:
    """What the page drawing now chose, for its notebook: `layer` (a row of the run the page draws) and
    `head` when the page has its own, and the page's own options (plain values, lists, dicts)."""
    session.setdefault(keys.NOTEBOOK_OPTIONS, {}).update(options)


def view(page_id: str, title: str, cur, options: dict) -> notebook.NotebookView:
    """The view on screen: the sidebar's choices as the user gave them, the shared head and what the page
    recorded in this rerun (`options`)."""
    options = dict(options)
    row, head = shared_head.chosen_head()
    row, head = options.pop("layer", row), options.pop("head", head)
    chosen = sidebar.choices()
    key = cur.key
    return notebook.NotebookView(
        page=page_id, model=chosen.model or cur.model.name, text=key.text, title=title,
        device=str(session.get(keys.DEVICE) or "auto"), dtype=chosen.dtype, local_attention=chosen.ours,
        max_tokens=int(key.cap), layers=None if key.layers is None else tuple(int(x) for x in key.layers),
        hide=chosen.hide, contributions=chosen.contributions, layer=int(row), head=int(head), options=options,
        chat=chosen.chat if cur.chat is not None else None)


def offer_notebook(page_id: str, title: str, cur) -> None:
    """The *Open as notebook* button under the sidebar's *Export* box, for a page drawn from the current run."""
    options = session.pop(keys.NOTEBOOK_OPTIONS, None) or {}  # this rerun's, whatever is drawn
    if cur.run is None or cur.stale or cur.model is None or cur.key is None:
        return
    if isinstance(cur.seq2seq, mha_viz.capture.EncoderDecoderRun) or seq2seq_views.is_cross(cur.run):
        st.sidebar.caption("Open as notebook: for encoder-only and decoder-only models.")
        return
    shown = view(page_id, title, cur, options)
    stem = figure_style.safe_filename(f"{shown.model.rsplit('/', 1)[-1]}-{shown.page}")
    st.sidebar.download_button(
        "Open as notebook", data=lambda: notebook.view_notebook(shown), file_name=f"{stem}.ipynb",
        mime="application/x-ipynb+json", on_click="ignore", key=keys.DL_NOTEBOOK, icon=":material/book_2:",
        help="A Jupyter notebook that loads this model with these options, computes what this page computed and "
             "draws the same figures with mha_viz.figures (installs nothing; the bundled models run offline).")
