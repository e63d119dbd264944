"""Figures of a generation, step by step: the token the model chose among its 10 best, every
head's attention from the query that chose it (a heads × context heatmap, grouped-query groups
marked), one head's causal matrix with that row framed, and where a head's attention went over
the steps (prompt, generated tokens, first token). Plain functions over arrays, and
`step_figures`, the four figures of one step of a `mha_viz.capture.Generation` as the app shows them;
nothing here knows Streamlit.

Step t (0-based) of a generation was chosen by query row `num_prompt - 1 + t`: what the model
looked at when it picked that token (`query_row`). `step_figures` reads only the rows it draws
(`run.layer_rows`, `run.rows`: one row of every head, at most MAX_MATRIX rows of one, one row a step),
never every head's array, so a long generation's steps draw as a dense one's do.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.style import COLORSCALE, axis_labels, colorbar, margin, plot_title
from mha_viz_models.attention.heads import kv_head

if TYPE_CHECKING:
    from mha_viz.capture.generation import Generation

GENERATED_COLOUR = "#d95f02"  # generated tokens on the axes and in the bars (prompt tokens stay black)
CHOSEN_COLOUR, OTHER_COLOUR = "#d95f02", "#9ecae1"
MAX_LABELLED = 160  # token labels on an axis up to this many tokens; beyond, hover tells
MAX_MATRIX = 160  # the causal matrix shows at most this many tokens a side, around the framed row


def query_row(num_prompt: int, step: int) -> int:
    """The query position whose attention chose the token of `step` (0-based)."""
    return num_prompt - 1 + step


def step_masses(attention: np.ndarray, num_prompt: int, num_steps: int) -> dict[str, np.ndarray]:
    """For one head's (n, n) causal matrix: at each step, the attention of the query that chose
    the token on the prompt, on the tokens generated before it, and on the first token (the
    sink). Arrays of length num_steps; prompt + generated = 1 for each step."""
    a = np.asarray(attention, dtype=np.float64)
    return row_masses(a[query_row(num_prompt, 0):query_row(num_prompt, num_steps)], num_prompt)


def row_masses(rows: np.ndarray, num_prompt: int) -> dict[str, np.ndarray]:
    """`step_masses` from the rows (steps, n) of the queries that chose each step's token."""
    rows = np.asarray(rows, dtype=np.float64)
    prompt = rows[:, :num_prompt].sum(axis=1)
    return {"prompt": prompt, "generated": rows[:, num_prompt:].sum(axis=1), "first": rows[:, 0].copy()}


def marked_labels(labels: list[str], num_prompt: int) -> list[str]:
    """Tick texts: prompt tokens as they are, generated ones (from num_prompt on) coloured and in
    italics. `labels` are already escaped (`style.axis_labels`)."""
    style = f"color:{GENERATED_COLOUR};font-style:italic"
    return [lab if i < num_prompt else f'<span style="{style}">{lab}</span>' for i, lab in enumerate(labels)]


def _token_axis(labels: list[str], num_prompt: int, title: str, **extra) -> dict:
    show = len(labels) <= MAX_LABELLED
    return dict(title=dict(text=title), type="category", tickmode="array", tickvals=labels,
                ticktext=marked_labels(labels, num_prompt), showticklabels=show, **extra)


def _origin(num_prompt: int, size: int) -> np.ndarray:
    """'prompt' / 'generated' for each of `size` positions (hover text)."""
    return np.where(np.arange(size) < num_prompt, "prompt", "generated")


def _boundary(fig: go.Figure, num_prompt: int, size: int, *, horizontal: bool = False) -> None:
    """A dashed line where the generated tokens start (between position num_prompt - 1 and num_prompt)."""
    if not 0 < num_prompt < size:
        return
    pos = num_prompt - 0.5
    line = dict(color=GENERATED_COLOUR, width=1.5, dash="dash")
    fig.add_shape(type="line", x0=pos, x1=pos, y0=0, y1=1, yref="paper", line=line)
    if horizontal:
        fig.add_shape(type="line", y0=pos, y1=pos, x0=0, x1=1, xref="paper", line=line)


def choice_bars(top: list[tuple[str, float]], chosen: str, chosen_prob: float, *, title: str) -> go.Figure:
    """The model's 10 best next tokens as horizontal bars (best on top), the chosen one coloured;
    a chosen token outside the 10 (sampling) is added at the bottom."""
    entries = [(str(tok), float(p)) for tok, p in top]
    hit = next((i for i, (tok, p) in enumerate(entries)
                if tok == chosen and abs(p - chosen_prob) < 1e-6), None)
    if hit is None:
        hit = next((i for i, (tok, _) in enumerate(entries) if tok == chosen), None)
    if hit is None:
        entries.append((str(chosen), float(chosen_prob)))
        hit = len(entries) - 1
    labels = axis_labels([tok for tok, _ in entries])
    probs = [p for _, p in entries]
    colours = [CHOSEN_COLOUR if i == hit else OTHER_COLOUR for i in range(len(entries))]
    fig = go.Figure(go.Bar(
        x=probs, y=labels, orientation="h", marker_color=colours, texttemplate="%{x:.3f}",
        textposition="outside", cliponaxis=False, hovertemplate="%{y}: %{x:.4f}<extra></extra>",
    ))
    fig.update_layout(title=plot_title(title), height=int(120 + 26 * len(entries)), margin=margin(r=50),
                      xaxis=dict(title=dict(text="probability"), range=[0, 1.08]),
                      yaxis=dict(type="category", autorange="reversed", title=dict(text="next token")),
                      showlegend=False)
    return fig


def head_labels(num_heads: int, num_kv_heads: int) -> list[str]:
    """'H3 (KV 1)' for each query head when heads share key/value heads, else 'H3'."""
    if num_kv_heads in (0, num_heads):
        return [f"H{h}" for h in range(num_heads)]
    return [f"H{h} (KV {kv_head(h, num_heads, num_kv_heads)})" for h in range(num_heads)]


def group_boundaries(num_heads: int, num_kv_heads: int) -> list[float]:
    """Row positions (between heads) where the shared key/value head changes."""
    if num_kv_heads in (0, num_heads):
        return []
    group = num_heads // num_kv_heads
    return [g * group - 0.5 for g in range(1, num_kv_heads)]


def heads_context(rows: np.ndarray, tokens: list[str], num_prompt: int, num_kv_heads: int, *,
                  title: str, rescale: bool = False) -> go.Figure:
    """Every head's attention from one query over its context: (heads, k) probabilities, one row
    per head, the k context tokens on the x axis (generated ones marked). Heads that share a
    key/value head are labelled with it and separated by lines between groups."""
    z = np.asarray(rows, dtype=np.float32)
    H, k = z.shape
    labels = axis_labels(tokens)
    names = head_labels(H, num_kv_heads)
    zmax = float(z.max()) if rescale and z.size and z.max() > 0 else 1.0
    origin = np.broadcast_to(_origin(num_prompt, k), (H, k))
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=names, zmin=0.0, zmax=zmax, colorscale=COLORSCALE, colorbar=colorbar("weight"),
        customdata=origin, xgap=1 if k <= 48 else 0, ygap=1,
        hovertemplate="%{y} → %{x} (%{customdata}): %{z:.3f}<extra></extra>",
    ))
    for pos in group_boundaries(H, num_kv_heads):
        fig.add_shape(type="line", y0=pos, y1=pos, x0=0, x1=1, xref="paper",
                      line=dict(color="black", width=2))
    _boundary(fig, num_prompt, k)
    fig.update_layout(
        title=plot_title(title), margin=margin(),
        xaxis=_token_axis(labels, num_prompt, "context (generated tokens in colour, after the dashed line)",
                          tickangle=-60, side="bottom"),
        yaxis=dict(type="category", autorange="reversed",
                   title=dict(text="head" if num_kv_heads in (0, H) else "query head (its KV head)")),
        height=int(min(900, 190 + 26 * H)),
    )
    return fig


def matrix_window(n: int, row: int, size: int = MAX_MATRIX) -> tuple[int, int]:
    """(start, stop) of at most `size` tokens around `row`, within 0..n."""
    if n <= size:
        return 0, n
    start = min(max(0, row - size // 2), n - size)
    return start, start + size


def causal_matrix(attention: np.ndarray, tokens: list[str], num_prompt: int, row: int, *, title: str,
                  rescale: bool = False, max_tokens: int = MAX_MATRIX) -> go.Figure:
    """One head's (n, n) causal matrix, queries down and keys across, generated tokens marked on
    both axes and the query row `row` framed. Past max_tokens a side, a window around the row."""
    a = np.asarray(attention, dtype=np.float32)
    start, stop = matrix_window(a.shape[0], row, max_tokens)
    return causal_window(a[start:stop, start:stop], start, tokens, num_prompt, row, title=title, rescale=rescale)


def causal_window(z: np.ndarray, start: int, tokens: list[str], num_prompt: int, row: int, *, title: str,
                  rescale: bool = False) -> go.Figure:
    """`causal_matrix` of the window of queries and keys start … start + m − 1 (z: (m, m)) of a head over
    len(tokens) tokens: what `step_figures` reads of a run, `run.rows` of those queries."""
    n, stop = len(tokens), start + z.shape[0]
    labels = axis_labels(tokens)[start:stop]
    local_prompt, local_row = num_prompt - start, row - start
    m = stop - start
    zmax = float(z.max()) if rescale and z.size and z.max() > 0 else 1.0
    more = f", tokens {start}–{stop - 1} of {n}" if (start, stop) != (0, n) else ""
    fig = go.Figure(go.Heatmap(
        z=z, x=labels, y=labels, zmin=0.0, zmax=zmax, colorscale=COLORSCALE, colorbar=colorbar("weight"),
        xgap=1 if m <= 48 else 0, ygap=1 if m <= 48 else 0,  # (no hover customdata: m² strings to send)
        hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
    ))
    if 0 <= local_row < m:
        fig.add_shape(type="rect", x0=-0.5, x1=m - 0.5, y0=local_row - 0.5, y1=local_row + 0.5,
                      line=dict(color=CHOSEN_COLOUR, width=3), name="current row")
    _boundary(fig, local_prompt, m, horizontal=True)
    fig.update_layout(
        title=plot_title(title + more), margin=margin(),
        xaxis=_token_axis(labels, local_prompt, "key (attended to)", tickangle=-60, side="bottom"),
        yaxis=_token_axis(labels, local_prompt, "query (attending)", autorange="reversed"),
        height=int(min(900, max(360, 22 * m + 140))),
    )
    return fig


def mass_lines(masses: dict[str, np.ndarray], *, title: str, current: int | None = None) -> go.Figure:
    """`step_masses` as lines over the steps (1-based on the axis); `current` (0-based) marked."""
    steps = np.arange(1, len(masses["prompt"]) + 1)
    fig = go.Figure()
    for key, name, colour, dash in (("prompt", "on the prompt", "#2171b5", "solid"),
                                    ("generated", "on generated tokens", GENERATED_COLOUR, "solid"),
                                    ("first", "on the first token (sink)", "#737373", "dot")):
        fig.add_trace(go.Scatter(x=steps, y=masses[key], mode="lines+markers", name=name,
                                 line=dict(color=colour, dash=dash),
                                 hovertemplate="step %{x}: %{y:.3f}<extra>" + html.escape(name) + "</extra>"))
    if current is not None:
        fig.add_vline(x=current + 1, line=dict(color="black", width=1, dash="dash"))
    fig.update_layout(title=plot_title(title), height=340, margin=margin(),
                      xaxis=dict(title=dict(text="step"), range=[0.5, max(len(steps), 1) + 0.5]),
                      yaxis=dict(title=dict(text="attention mass"), range=[-0.02, 1.02]),
                      legend=dict(orientation="h", y=-0.3))
    return fig


STEP_VIEWS = ("choices", "heads", "matrix", "masses")  # the figures of one step, as the app lays them out


def step_figures(gen: Generation, step: int, layer: int = 0, head: int = 0, *, rescale: bool = False,
                 views: tuple[str, ...] = STEP_VIEWS) -> dict[str, go.Figure]:
    """The figures of step `step` (0-based) of a generation, by name: "choices" (the token picked
    among the 10 most probable), "heads" (every head of row `layer` from the query that picked
    it), "matrix" (head `head`'s causal matrix with that row framed) and "masses" (where that
    head's query looked at each step). Only `views` are made."""
    run, P, T = gen.run, gen.num_prompt_tokens, len(gen.steps)
    if not 0 <= step < T:
        raise IndexError(f"step {step}: this generation has steps 0 to {T - 1}")
    unknown = set(views) - set(STEP_VIEWS)
    if unknown:
        raise ValueError(f"unknown view {sorted(unknown)}: choose from {', '.join(STEP_VIEWS)}")
    s, q = gen.steps[step], query_row(P, step)
    where, name = html.escape(run.tokens[q], quote=False), run.layer_ids[layer]
    start, stop = matrix_window(run.n, q)
    build = {
        "choices": lambda: choice_bars(s.top, s.token, s.prob,
                                       title=f"Step {step + 1}: the 10 most probable next tokens"),
        "heads": lambda: heads_context(
            run.layer_rows(layer, q, q + 1)[:, 0, :q + 1], run.tokens[:q + 1], P, run.kv_heads(layer), rescale=rescale,
            title=f"Layer {name}, step {step + 1}: every head from “{where}” (position {q})"),
        "matrix": lambda: causal_window(run.rows(layer, head, start, stop)[:, start:stop], start, run.tokens, P, q,
                                        rescale=rescale,
                                        title=f"Layer {name}, head {head}: row {q} (step {step + 1}) framed"),
        "masses": lambda: mass_lines(row_masses(run.rows(layer, head, query_row(P, 0), query_row(P, T)), P),
                                     current=step, title=f"Layer {name}, head {head}: where the steps looked"),
    }
    return {v: build[v]() for v in views}


def generation_step(gen: Generation, step: int, *, layer: int = 0, head: int = 0, view: str = "heads",
                    rescale: bool = False) -> go.Figure:
    """One step (0-based; -1 the last) of a generation (`mha_viz.generate`), as the Generate page
    draws it. view: "heads" (every head of `layer` from the query that chose the token),
    "matrix" (head `head`'s causal matrix, that query's row framed), "choices" (the token
    picked among the 10 most probable) or "masses" (where that head's query looked, step by step)."""
    step = range(len(gen.steps))[step]
    return step_figures(gen, step, layer, head, rescale=rescale, views=(view,))[view]
