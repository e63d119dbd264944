"""A compressed layer's memory entries as columns of their own (DeepSeek-V4: `capture.memory_columns`): one head's
weight from each query row to each entry, an entry labelled by the tokens it compresses ("▤ 4–11"), beside the
head's heatmap over the tokens; and each head's split of its rows among tokens, entries and its sink."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from mha_viz.capture import memory_columns
from mha_viz.drawing.style import COLORSCALE, axis_labels, colorbar, margin, plot_title, scale_top

CAPTION = ("▤ a–b: a compressed memory entry, made from tokens a to b of the text (the layer compresses each window "
           "of tokens into one entry; a query sees an entry once its window has closed). Each row's weight is split "
           "among the tokens (the heatmap above), these entries and the head's learned sink: the three sum to 1.")


def memory_heatmap(run, layer: int, head: int, start: int, stop: int, *, rescale: bool = False) -> go.Figure | None:
    """Query rows start … stop − 1 of one head against its layer's compressed entries, or None for a layer without
    any (or a text shorter than one window)."""
    found = memory_columns.of(run, layer)
    if found is None or not found.labels:
        return None
    z = found.weights[head, start:stop]
    rows = axis_labels(run.tokens)[start:stop]
    entries = [html.escape(label) for label in found.labels]
    share = float(z.sum(-1).mean()) if len(z) else 0.0
    title = (f"Layer {run.layer_ids[layer]}, head {head}: its {found.layout.name} memory's {len(entries)} entries "
             f"(mean share of a row {share:.3f})")
    fig = go.Figure(go.Heatmap(
        z=z, x=entries, y=rows, zmin=0.0, zmax=scale_top(z, rescale), colorscale=COLORSCALE,
        colorbar=colorbar("weight"), hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
        xgap=1 if len(entries) <= 48 else 0, ygap=1 if len(rows) <= 48 else 0))
    show = len(rows) <= 160
    fig.update_layout(
        title=plot_title(title), margin=margin(),
        xaxis=dict(title=dict(text="compressed memory entry (the tokens it compresses)"), tickangle=-60,
                   type="category", showticklabels=len(entries) <= 160),
        yaxis=dict(title=dict(text="query (attending)"), autorange="reversed", type="category", showticklabels=show),
        height=int(min(900, max(360, 22 * len(rows) + 140))))
    return fig


def split_bars(run, layer: int) -> go.Figure:
    """Each head's mean split of its rows (tokens, compressed memory, sink) in the run's layer `layer`, as stacked
    bars."""
    shares = memory_columns.shares(run, layer).mean(-1)  # (3, H)
    heads = [f"head {h}" for h in range(run.num_heads)]
    colours = ("#2171b5", "#E69F00", "#999999")
    fig = go.Figure([go.Bar(name=name, x=heads, y=share, marker_color=colour,
                            hovertemplate=f"%{{x}}: %{{y:.3f}} on {name}<extra></extra>")
                     for name, share, colour in zip(memory_columns.PARTS, shares, colours)])
    fig.update_layout(barmode="stack", title=plot_title(f"Layer {run.layer_ids[layer]}: where each head's rows go "
                                                        "(mean over the rows)"),
                      yaxis=dict(title=dict(text="share of a row"), range=[0, 1]), margin=margin(), height=340,
                      legend=dict(orientation="h", y=-0.2))
    return fig

