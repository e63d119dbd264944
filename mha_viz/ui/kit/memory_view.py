"""Compressed memory on the pages (DeepSeek-V4, issue 89: `capture.memory_columns`): the Head view's entries as
columns of their own beside the head's tokens, the Model view's grid of each head's share on the entries, Model facts'
table of where every head's rows go, and a caption for the pages that show rows over the tokens alone."""

from __future__ import annotations

import streamlit as st

from mha_viz import metrics
from mha_viz.capture import memory_columns
from mha_viz.drawing import memory_columns as memory_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.ui.kit import charts, keys
from mha_viz.views import detail
from mha_viz_models.attention.memory import memory_layouts

NOT_HELD = ("This layer spreads each row over compressed memory entries too; with tokens hidden the rows are "
            "renormalised over the kept tokens, so the entries are not shown. Show every token to see them.")


def held(cur) -> bool:
    """Whether the run before hiding tokens holds compressed memory entries for its tokens (not a long run's, nor
    one read from a file)."""
    return memory_columns.has_memory(cur.full_run or cur.run)


@st.cache_resource(show_spinner=False, max_entries=16)
def _split(key, _run):
    """`metrics.memory_split` of the run before hiding and the lens (key: that run's), once per analysis: it sums
    every layer's rows."""
    return metrics.memory_split(_run)


def split_of(cur):
    """Every head's split of the run on screen before hiding tokens (cached)."""
    return _split(cur.key._replace(hidden=(), lens=""), cur.full_run or cur.run)


def merged_with_sink(cur, run) -> bool:
    """Whether `run`'s missing mass holds its model's compressed entries besides the sink: a model with compressed
    layers whose run does not hold them apart (a long run)."""
    model = cur.model
    return (model is not None and not memory_columns.has_memory(run)
            and bool(memory_layouts(getattr(model.hf_model, "config", None))) and run.hidden is None)


def head_entries(cur, layer: int, head: int, rescale: bool, rows: tuple[int, int]) -> None:
    """Under the Head view's heatmap: the head's query rows `rows` (start, stop: the heatmap's window, at most
    FULL_DETAIL_TOKENS of them drawn) over its layer's compressed entries, and the layer's split of every head's rows;
    for a run whose entries were let go (hidden tokens), why they are not shown."""
    run = cur.run
    full = cur.full_run
    if not memory_columns.has_memory(run):
        if full is not None and memory_columns.of(full, layer) is not None:
            st.info(NOT_HELD, icon=":material/info:")
        return
    if memory_columns.of(run, layer) is None:
        return
    start = min(max(int(rows[0]), 0), run.n - 1)
    stop = min(max(int(rows[1]), start + 1), run.n, start + detail.FULL_DETAIL_TOKENS)
    fig = charts.cached("memory_entries", (cur.key, layer, head, rescale, start, stop),
                        lambda: memory_figures.memory_heatmap(run, layer, head, start, stop, rescale=rescale))
    if fig is None:  # a text shorter than the layer's window: no entry yet
        st.caption("This layer compresses windows of tokens into memory entries; this text is shorter than one "
                   "window, so it has none yet.")
        return
    charts.show(fig, key=keys.MEMORY_HEATMAP)
    if stop - start < run.n:
        st.caption(f"Query rows {start}–{stop - 1} of {run.n:,}.")
    st.caption(memory_figures.CAPTION)
    charts.show(charts.cached("memory_split", (cur.key, layer), lambda: memory_figures.split_bars(run, layer)),
                key=keys.MEMORY_SPLIT)


def memory_grid(cur) -> None:
    """The Model view's grid: each head's mean share of a row on its layer's compressed entries."""
    run = cur.full_run or cur.run
    if not memory_columns.has_memory(run):
        return
    table = split_of(cur)
    grid = table["memory"].to_numpy().reshape(run.num_layers, run.num_heads)
    st.subheader("Compressed memory")
    charts.show(metric_figures.metric_grid(grid, title="Attention given to compressed memory entries, every head",
                                           layer_ids=run.layer_ids), key=keys.MEMORY_GRID, width="content")
    st.caption("Each cell: the mean over queries of what a head gave its layer's compressed memory entries (each "
               "compresses a window of earlier tokens); the heatmaps show the rows over the tokens, and the Head "
               f"view shows the entries. Mean over heads {float(grid.mean()):.3f}; highest {float(grid.max()):.3f}.")


def memory_table(cur) -> None:
    """Model facts' section: per layer, where the heads' rows go (tokens, entries, sink), and every head."""
    run = cur.full_run or cur.run
    if not memory_columns.has_memory(run):
        return
    st.subheader("Compressed memory: where each row goes")
    table = split_of(cur)
    by_layer = table.groupby(["layer", "kind", "entries"])[["tokens", "memory", "sink"]].mean().reset_index()
    st.dataframe(by_layer.round(4), hide_index=True, key=keys.MEMORY_LAYERS)
    st.caption("Each row of a query's attention is split among the text's tokens, the layer's compressed memory "
               "entries (each compresses a window of tokens) and the head's learned sink; the three sum to 1. The "
               "means over the layer's heads and rows.")
    with st.expander("Every head"):
        st.dataframe(table.round(4), hide_index=True, key=keys.MEMORY_HEADS)
