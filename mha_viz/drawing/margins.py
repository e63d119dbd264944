"""Margins that already hold what is drawn around a plot, so that the browser draws each chart once (issue 59).

The figures set narrow margins (`style.margin`) and leave their tick labels, axis titles, colour bars and legends to
Plotly's `automargin`, which Streamlit's theme turns on for every axis. Plotly then draws a chart, measures what
sticks out, and draws it again with the margins it found: on Head similarity that second drawing was 0.4 of the
page's 0.7 s (benchmarks/margins.py lists the charts drawn twice). `fit` sets each side's margin to at least what
those parts need, estimated from their text at the sizes Streamlit's theme draws them in (measured in Chromium:
tick labels 12 px, axis titles 14 px, a character about 0.56 of its size; wide characters, CJK, a whole size).
`automargin` stays on: where the estimate falls short, Plotly still grows the margin, as before; where it is
generous, a few pixels of white are the price.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.style import hung_pad, label_text, title_room

TICK_FONT_PX = 12  # Streamlit's theme: tick labels, colour bar ticks, legend items
TITLE_FONT_PX = 14  # an axis's or a colour bar's title
CHAR_EM = 0.56  # the width of a character of Source Sans, in its size (a wide character: 1)
LABEL_GAP_PX = 15  # between the plot and its tick labels (ticks, the theme's margin pad)
LABEL_LINE_PX = 16  # the height of a 12-px tick label's line
TITLE_ROOM_PX = 44  # an axis title: its 19-px line, the gap to the labels and the edge
BARE_EDGE_PX = 10  # the edge beyond the labels of an axis without a title
COLORBAR_GAP_PX = 23  # between the plot and a colour bar (its xpad), and beyond it
LEGEND_ROW_PX = 26  # a horizontal legend's row under the plot
LEGEND_ITEM_PX = 50  # a legend item's symbol and gaps, beside its text (at 46 the head types' legend drew 3 px wider)
SLACK_PX = 6  # added to each side an estimate sets: what the estimates missed by, in Chromium, at most
PLOT_WIDTH_PX = 700  # a chart's width where its figure does not set one (the main area's)

_TAGS = re.compile(r"<[^>]*>")
_NUMBER_CHARS = 5  # a numeric axis's labels when their values are not read: "0.25", "−1.5", "1000"
NUMBERS_READ = 100_000  # a trace's values read for its axis's labels (more: `_NUMBER_CHARS` characters)


def text_px(text: str, size: float = TICK_FONT_PX) -> float:
    """The width of one line of `text` (HTML tags and entities as shown, a label's repeat suffix dropped)."""
    shown = html.unescape(_TAGS.sub("", label_text(str(text))))
    return sum(1.0 if unicodedata.east_asian_width(c) in "WF" else CHAR_EM for c in shown) * size


def widest(texts, size: float = TICK_FONT_PX) -> float:
    """The widest of `texts` (the longest line of each), 0 for none."""
    return max((text_px(line, size) for t in texts for line in str(t).split("<br>")), default=0.0)


def tick_texts(low: float, high: float) -> list[str]:
    """The widest tick labels Plotly gives an axis or colour bar from `low` to `high`: its ends at a step of 1, 2
    or 5 times a power of ten that makes about five ticks, with that step's decimals."""
    span = float(high) - float(low)
    if not math.isfinite(span) or span <= 0:
        return [f"{low:g}"] if math.isfinite(float(low)) else ["0" * _NUMBER_CHARS]
    step = 10.0 ** math.floor(math.log10(span / 5))
    step *= next(m for m in (1, 2, 5, 10) if span / (step * m) <= 6)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    ends = (math.floor(low / step) * step, math.ceil(high / step) * step)
    return [f"{v:.{decimals}f}".replace("-", "−") for v in ends]


def _numbers(values) -> list[str]:
    """Tick labels for numeric `values` (a range, or a trace's data): `tick_texts` of their extremes."""
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return ["0" * _NUMBER_CHARS]
    finite = a[np.isfinite(a)]
    return tick_texts(float(finite.min()), float(finite.max())) if finite.size else []


def _text(title) -> str:
    """An axis's, a colour bar's or a legend's title text: the title given as a dict ({"text": …}) or a string."""
    return (title.get("text") if isinstance(title, dict) else title) or ""


def _title_room(title) -> float:
    """What an axis title takes across its axis: TITLE_ROOM_PX for a line, a 19-px line more for each <br>."""
    return TITLE_ROOM_PX + 19 * _text(title).count("<br>")


def _trace_axis(trace: dict, letter: str) -> str:
    """The layout name of the x or y axis a trace is drawn on ("xaxis2" for xaxis="x2")."""
    ref = trace.get(f"{letter}axis") or letter
    return f"{letter}axis{ref[1:]}"


def _labels(traces: list[dict], name: str, axis: dict, letter: str) -> tuple[list, float]:
    """(the tick labels an axis shows, their font size): its ticktext, its string tickvals, or the strings its
    traces place on it; a numeric axis's values are estimated (`_NUMBER_CHARS` characters)."""
    size = axis.get("tickfont", {}).get("size") or TICK_FONT_PX
    if axis.get("showticklabels") is False or axis.get("visible") is False:
        return [], size
    ticktext, tickvals, bounds = axis.get("ticktext"), axis.get("tickvals"), axis.get("range")
    if ticktext is not None:
        return list(ticktext), size
    if tickvals is not None and any(isinstance(v, str) for v in tickvals):
        return list(tickvals), size
    if tickvals is not None:
        return [f"{v:g}" for v in tickvals], size
    if bounds is not None and None not in bounds and axis.get("type") != "category":
        return _numbers(bounds), size
    found = []
    for trace in traces:
        if _trace_axis(trace, letter) != name:
            continue
        values = trace.get(letter)
        if values is not None and len(values) and isinstance(values[0], str):
            found.extend(values)
        elif values is not None and len(values) <= NUMBERS_READ:
            found.extend(_numbers(values))
        elif values is not None or trace.get("type") in ("heatmap", "bar", "scatter", "box", "histogram"):
            found.append("0" * _NUMBER_CHARS)
    return found, size


def _turned(axis: dict, labels: list, size: float) -> float:
    """The height under the plot of an x axis's labels: turned by its tickangle, or level."""
    width = widest(labels, size)
    angle = axis.get("tickangle")
    if angle is None or angle == "auto":
        return LABEL_LINE_PX * size / TICK_FONT_PX
    a = math.radians(float(angle))
    return width * abs(math.sin(a)) + LABEL_LINE_PX * size / TICK_FONT_PX * abs(math.cos(a))


def _overhang(axis: dict, labels: list, size: float) -> tuple[str | None, float]:
    """How far an x axis's turned labels reach past the plot's side: a label turned by a negative tickangle ends at
    its tick and runs down to the left (the first one past the left edge: "When" drawn as "hen"), a positive one
    down to the right (the last one). (side, px), or (None, 0) for level or upright labels."""
    angle = axis.get("tickangle")
    if not labels or angle is None or angle == "auto" or float(angle) % 180 in (0.0, 90.0):
        return None, 0.0
    a = math.radians(float(angle))
    label = labels[0] if a < 0 else labels[-1]
    return ("l" if a < 0 else "r"), text_px(label, size) * abs(math.cos(a)) + BARE_EDGE_PX


def _colorbars(layout: dict, traces: list[dict]) -> list:
    """The colour bars the figure draws, each (its colorbar dict, (low, high)): of its coloraxes, and of its traces
    that show a scale."""
    used = {ref for trace in traces for ref in (trace.get("coloraxis"), trace.get("marker", {}).get("coloraxis"))
            if ref}
    bars = [(axis.get("colorbar", {}), (axis.get("cmin"), axis.get("cmax"))) for name, axis in _subplots(layout,
                                                                                                          "coloraxis")
            if name in used and axis.get("showscale") is not False]
    for trace in traces:
        if trace.get("coloraxis"):
            continue
        if trace.get("type") in ("heatmap", "contour", "histogram2d") and trace.get("showscale") is not False:
            bounds = (trace.get("zmin"), trace.get("zmax"))
            z = trace.get("z")
            if None in bounds and z is not None and np.size(z) <= NUMBERS_READ:
                z = np.asarray(z, dtype=float)
                bounds = (float(np.nanmin(z)), float(np.nanmax(z))) if np.isfinite(z).any() else (None, None)
            bars.append((trace.get("colorbar", {}), bounds))
        marker = trace.get("marker", {})
        if _marker_scale(marker):
            bars.append((marker.get("colorbar", {}), (marker.get("cmin"), marker.get("cmax"))))
    return bars


def _marker_scale(marker: dict) -> bool:
    """Whether Plotly draws a marker's colour bar: `showscale`, or where it is unset, a colour bar given (plotly.js
    then shows it: a scatter whose marker sets only `colorbar` drew one)."""
    shown = marker.get("showscale")
    if shown is not None:
        return bool(shown)
    return bool(marker.get("colorbar"))


def bar_ticks(low: float, high: float, length_px: float) -> list[str]:
    """The tick labels plotly.js puts on a colour bar `length_px` long from `low` to `high`: about one a 40 px, 5 to
    10 of them (its `autoTicks` for a vertical axis), at a step of 2, 5 or 10 times a power of ten, each shown
    with the step's decimals and no trailing zero ("−1.5", "−1")."""
    span = float(high) - float(low)
    if not math.isfinite(span) or span <= 0:
        return []
    rough = span / (min(max(length_px / 40, 4), 9) + 1)
    base = 10.0 ** math.floor(math.log10(rough))
    step = base * next(m for m in (2, 5, 10) if m > rough / base * (1 + 1e-9))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
    texts = [f"{k * step:.{decimals}f}" for k in range(first, last + 1)][:64]
    return [(t.rstrip("0").rstrip(".") if "." in t else t).replace("-", "−") for t in texts]


def _plot_height(layout: dict) -> float:
    """The height of the plot area as the figure sets it (Plotly's defaults where it does not)."""
    margin = layout.get("margin", {})
    top = PLOTLY_MARGIN["t"] if margin.get("t") is None else margin["t"]
    bottom = PLOTLY_MARGIN["b"] if margin.get("b") is None else margin["b"]
    return max(0.0, (layout.get("height") or 450) - top - bottom)


def _colorbar_width(bar: dict, bounds, plot_px: float) -> float:
    """What a vertical colour bar takes beside the plot: its bar and tick labels, or its title when wider. The
    labels: the wider of `tick_texts` at their ends and those plotly.js puts along the bar (`bar_ticks`: a tall bar
    has more, at a finer step)."""
    thickness = bar.get("thickness") or 30
    if bounds and None not in bounds:
        length = plot_px * (bar.get("len") or 1.0)
        ticks = _numbers(bounds) + bar_ticks(float(bounds[0]), float(bounds[1]), length)
    else:
        ticks = ["0" * (_NUMBER_CHARS - 1)]
    title = _text(bar.get("title"))
    return max(thickness + 15 + widest(ticks), widest([title], TITLE_FONT_PX) + 19 if title else 0.0)


def _legend(layout: dict, traces: list[dict]) -> tuple[str, float] | None:
    """(where a shown legend sits, "r" or "b", and what it takes there), or None without one."""
    shown = [t for t in traces if t.get("showlegend") is not False and t.get("name")]
    showlegend = layout.get("showlegend")
    if showlegend is False or (showlegend is None and len(shown) < 2) or not shown:
        return None
    legend = layout.get("legend", {})
    if legend.get("orientation") == "h":
        if legend.get("y") is not None and legend["y"] >= 0.5:
            return None
        items = [widest([t["name"]]) + LEGEND_ITEM_PX for t in shown] + [widest([_text(legend.get("title"))])]
        rows = math.ceil(sum(items) / (layout.get("width") or PLOT_WIDTH_PX))
        return "b", LEGEND_ROW_PX * max(rows, 1)
    if legend.get("x") is not None and legend["x"] < 1:
        return None  # inside the plot
    return "r", widest([t["name"] for t in shown]) + LEGEND_ITEM_PX


_SUBPLOT = {prefix: re.compile(rf"{prefix}(\d*)$") for prefix in ("xaxis", "yaxis", "coloraxis")}


def _subplots(layout: dict, prefix: str) -> list[tuple[str, dict]]:
    """The layout's axes of a kind ("xaxis", "yaxis", "coloraxis"), each (its name, its dict), in their number's
    order; the first of each kind is there even where the layout sets nothing of it (as Plotly's `select_xaxes`,
    `select_coloraxes`: a trace on "coloraxis" draws its colour bar with the layout silent)."""
    found = {name: axis for name, axis in layout.items() if _SUBPLOT[prefix].match(name)}
    found.setdefault(prefix, {})
    return sorted(found.items(), key=lambda item: int(item[0][len(prefix):] or 1))


def room(fig: go.Figure) -> dict[str, int]:
    """Each side's margin that the figure's drawn parts need: the left one its y labels and title, the bottom one
    its x labels (turned) and title and a horizontal legend, the right one its colour bars or a legend beside it,
    the top one a title of several lines hung from the figure's top (`fit` hangs it, as `style.top_title`). A title
    of one line above the plot (`style.plot_title`) fits the figures' own top margin. Read from the figure's JSON
    (its layout and traces as dicts): a head heatmap's in 0.68 ms, against 2.43 ms through Plotly's property objects
    (docs/speed.md)."""
    return _room(fig.layout.to_plotly_json(), [trace.to_plotly_json() for trace in fig.data])


def _room(layout: dict, traces: list[dict]) -> dict[str, int]:
    need = {"l": 0.0, "r": 0.0, "t": 0.0, "b": 0.0}
    for name, axis in _subplots(layout, "yaxis"):
        labels, size = _labels(traces, name, axis, "y")
        side = "r" if axis.get("side") == "right" else "l"
        titled = bool(_text(axis.get("title")))
        width = LABEL_GAP_PX + widest(labels, size) if labels else 0.0
        need[side] = max(need[side], width + (_title_room(axis.get("title")) if titled else BARE_EDGE_PX if labels
                                              else 0.0))
    for name, axis in _subplots(layout, "xaxis"):
        if axis.get("side") == "top":
            continue  # above the plot: the figures that put labels there leave the room themselves
        labels, size = _labels(traces, name, axis, "x")
        titled = bool(_text(axis.get("title")))
        height = LABEL_GAP_PX + _turned(axis, labels, size) if labels else 0.0
        need["b"] = max(need["b"], height + (_title_room(axis.get("title")) if titled else BARE_EDGE_PX if labels
                                             else 0.0))
        side, reach = _overhang(axis, labels, size)
        if side is not None and axis.get("domain") in (None, (0, 1), [0, 1]):  # an axis at the figure's edge
            need[side] = max(need[side], reach)
    bars = [_colorbar_width(bar, bounds, _plot_height(layout)) for bar, bounds in _colorbars(layout, traces)
            if bar.get("orientation") != "h"]
    if bars:
        need["r"] = max(need["r"], COLORBAR_GAP_PX + max(bars))
    legend = _legend(layout, traces)
    if legend is not None:
        side, px = legend
        need[side] = need[side] + px if side == "b" else max(need[side], px)
    out = {side: math.ceil(px + SLACK_PX) if px else 0 for side, px in need.items()}
    title = layout.get("title")
    if _text(title) and (several_lines(title) or title.get("yref") == "container"):
        # hung from the top: its lines, and the slack that keeps Plotly from pushing the margin itself (its push also
        # lifts a title's lines by one line and more, under the toolbar: plotly.js `drawMainTitle`)
        out["t"] = hung_pad(_text(title))["pad"]["t"] + title_room(_text(title)) + SLACK_PX
    return out


def several_lines(title) -> bool:
    """A title (its dict) of several lines anchored above the plot (`style.plot_title`). Plotly draws its first line
    there and the others down over the plot, and moves them up only when its automargin pushes the top margin, which
    draws the chart a second time (plotly.js `drawMainTitle`: the lines are shifted only when the margin grew)."""
    return bool(isinstance(title, dict) and "<br>" in _text(title) and title.get("yref") != "container"
                and title.get("automargin"))


PLOTLY_MARGIN = {"l": 80, "r": 80, "t": 100, "b": 80}  # Plotly's margins where a figure sets none


def tall_enough(fig: go.Figure, plot_px: int) -> go.Figure:
    """`fig`, changed in place, as tall as a plot area of `plot_px` and the margins its parts need (`room`, or its own
    where larger): a fixed height under a title of several lines and turned labels left the plot a few pixels (the
    Head view's token strip: 59 px of 360). Returns it."""
    need, margin = room(fig), fig.layout.margin
    top = max(need["t"], PLOTLY_MARGIN["t"] if margin.t is None else margin.t)
    bottom = max(need["b"], PLOTLY_MARGIN["b"] if margin.b is None else margin.b)
    fig.layout.height = plot_px + top + bottom
    return fig


def fit(fig: go.Figure) -> go.Figure:
    """`fig`, changed in place: each margin at least its `room` (never smaller than it was), a title of several lines
    above the plot hung from the figure's top instead (`style.top_title`, with the room `room` gives it). Returns it."""
    title = fig.layout.title.to_plotly_json()
    if several_lines(title):  # no pad under it: Plotly's push reads the pads, and `room` leaves the gap below
        fig.update_layout(title=dict(yref="container", y=1, yanchor="top") | hung_pad(_text(title), below=0))
    current = fig.layout.margin
    was = {side: getattr(current, side) for side in PLOTLY_MARGIN}
    wanted = {side: max(int(PLOTLY_MARGIN[side] if was[side] is None else was[side]), px)
              for side, px in room(fig).items()}
    if any(wanted[side] != was[side] for side in wanted):
        current.l, current.r, current.t, current.b = (wanted[side] for side in "lrtb")  # 0.06 ms; update_layout 0.5
    return fig
