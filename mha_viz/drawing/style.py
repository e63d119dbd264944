"""What every Plotly figure of mha-viz shares: colour scales, titles, margins, colour bars and
token labels on axes.

Token labels are HTML-escaped (Plotly renders a subset of HTML in text) and made unique
(Plotly merges equal category labels) with zero-width suffixes that do not show.

Plotly's toolbar (its modebar: the camera, zoom and pan buttons) shows over a chart's top right
corner when the pointer is on the chart. Every figure keeps a band of TOOLBAR_PX free for it at
its top (`margin`, `plot_title`, `top_title`), so it never covers a title or the column labels,
and a long title wraps (`wrap_title`) rather than run past the chart's edge.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np

from mha_viz.metrics.measures import PATTERN_CLASSES

# Light (no attention) to dark blue (all attention): ColorBrewer Blues.
COLORSCALE = [
    [0.0, "#f7fbff"], [0.125, "#deebf7"], [0.25, "#c6dbef"], [0.375, "#9ecae1"], [0.5, "#6baed6"],
    [0.625, "#4292c6"], [0.75, "#2171b5"], [0.875, "#08519c"], [1.0, "#08306b"],
]
DIVERGING = "RdBu_r"  # signed values, centred on 0
# One colour per pattern class (colour-blind-safe Okabe–Ito), every figure's, in PATTERN_CLASSES' order. "broad" is
# the palette's yellow, not its sky blue, which sat beside "sink"'s blue and read as one class.
PATTERN_COLOURS = dict(zip(PATTERN_CLASSES, ("#CC79A7", "#009E73", "#E69F00", "#0072B2", "#F0E442", "#D55E00",
                                             "#999999")))

_ZW = "\u200b"  # starts a suffix; then the occurrence number in binary as U+200C (0) / U+200D (1)
_BITS = {"0": "\u200c", "1": "\u200d"}


def axis_labels(tokens: list[str]) -> list[str]:
    """HTML-escaped labels; the k-th repeat of a token gets an invisible zero-width suffix
    encoding k in binary (O(log k) characters). Display tokens never contain these characters:
    `tokens.visible` shows format characters as codes."""
    seen: dict[str, int] = {}
    labels = []
    for tok in tokens:
        label = html.escape(tok, quote=False)
        k = seen.get(label, 0)
        seen[label] = k + 1
        if k:
            label += _ZW + "".join(_BITS[b] for b in format(k, "b"))
        labels.append(label)
    return labels


def label_text(label: str) -> str:
    """The token a label shows (inverse of `axis_labels` for one label)."""
    return html.unescape(label.split(_ZW, 1)[0])


TOOLBAR_PX = 36  # the band at the top of every figure kept for Plotly's toolbar (28 px high, 2 px from the top)
# what Plotly lifts a title of several lines hung from the figure's top above where it puts one line (its first
# line's baseline at the pad, not its cap: measured in Chromium, 12 px at 17-px text, whatever the lines' count)
HUNG_LINES_PX = 12
TITLE_CHARS = 48  # a title line's most characters: 17-px text across a chart in half of the main area (~420 px)
_OUTSIDE_TAGS = re.compile(r" (?![^<>]*>)")  # a space that is not inside an HTML tag (<span style="…">)
_PHRASE_END = re.compile(r"(?<=[·,:;]) (?![^<>]*>)| (?=\()")  # a space after · , : ; or before "("


def _shown_length(text: str) -> int:
    return len(html.unescape(re.sub(r"<[^>]*>", "", text)))


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """`text` with a line break (<br>) where a line would pass `width` shown characters (tags and
    entities count as what they show): at the end of its last phrase (after · , : ; or before a
    parenthesis) in its second half, else at its last space; its own breaks kept."""
    lines = []
    for line in str(text).split("<br>"):
        current = ""
        for word in _OUTSIDE_TAGS.split(line):
            if current and _shown_length(f"{current} {word}") > width:
                ends = [m.start() for m in _PHRASE_END.finditer(current)
                        if _shown_length(current[:m.start()]) > width // 2]
                cut = ends[-1] if ends else len(current)
                lines.append(current[:cut])
                current = (current[cut + 1:] + " " + word).strip() if cut < len(current) else word
            else:
                current = f"{current} {word}" if current else word
        lines.append(current)
    return "<br>".join(lines)


# under a title: its text box reaches ~6 px below the pad, a tick label at the plot's top ~8 px above it
TITLE_GAP_PX = 20


def plot_title(text: str) -> dict:
    """A title above the plot that pushes the margin, so rotated tick labels never overlap it, wrapped
    to the width of a half-width chart, with the toolbar's band kept free above it (`margin`) and a gap
    below it (pad.b: Plotly applies the pad of the side the title is anchored by)."""
    return dict(text=wrap_title(text), automargin=True, yref="paper", y=1, yanchor="bottom", x=0, xanchor="left",
                pad=dict(t=TOOLBAR_PX, b=TITLE_GAP_PX))


TITLE_LINE_PX = 22  # one line of a figure's title (17-px text)
PLOT_WIDTH_PX = 720  # a full-width chart's plotting area in the main area of a 1280-px window
TICK_CHAR_PX = 7  # a character of a tick label (12-px text)
NOTE_ROW_PX = 24  # a row of subplot titles (12-px annotations) and the gap under it
TICK_LINE_PX = 16  # along an axis, what a 12-px tick label needs so the next one never meets it (its box)
TURNED_PX = TICK_LINE_PX / 0.87  # along the x axis, what a label turned 60° needs (its line over sin 60°)


def tick_step(count: int, room_px: float, each_px: float = TICK_LINE_PX) -> int:
    """Every how many of `count` labels one is shown along `room_px` pixels of an axis when each needs
    `each_px`: 1 (every label) where they fit, else the fewest skipped."""
    if count <= 1 or room_px <= 0:
        return 1
    return max(1, math.ceil(count * each_px / room_px - 1e-9))


def spaced_ticks(labels: list[str], step: int = 1) -> dict:
    """A category axis's ticks: every `step`-th of its `labels` (from the first), set outright, so Plotly
    never drops one it would find too close."""
    shown = list(labels)[::max(1, step)]
    return dict(tickmode="array", tickvals=shown, ticktext=shown)


def marked_ticks(labels: list[str], marked, step: int = 1) -> dict:
    """A category axis's ticks where only every `step`-th label fits: the `marked` positions' labels (a minimal
    pair's changed tokens) always, then every `step`-th from the first that is at least `step` from each label
    already shown; set outright, so Plotly drops none and thins none of its own."""
    step = max(1, step)
    kept = sorted({int(i) for i in marked if 0 <= int(i) < len(labels)})
    for i in range(0, len(labels), step):
        if all(abs(i - k) >= step for k in kept):
            kept.append(i)
    shown = [labels[i] for i in sorted(kept)]
    return dict(tickmode="array", tickvals=shown, ticktext=shown)


def turned_room(labels: list[str]) -> int:
    """The px under a plot that its x labels, turned 60°, take (sin 60° of the longest shown text, and a gap)."""
    return int(0.87 * TICK_CHAR_PX * max((len(label_text(x)) for x in labels), default=0)) + 14


def more_lines_px(text: str) -> int:
    """What a `top_title` of `text` takes above the plot beyond its first line (TITLE_LINE_PX a wrapped line more):
    a figure that leaves room for one line and labels under it (a grid's top axis) adds it to its top margin and
    height (issue 90: a second line met a metric grid's axis title "head" at 1366 wide)."""
    return TITLE_LINE_PX * wrap_title(text).count("<br>")


def title_room(text: str, below: int = 0) -> int:
    """The top margin (before `margin` adds the toolbar's band) that a `top_title` of `text` needs:
    its wrapped lines, the gap under them, and `below` px more (e.g. NOTE_ROW_PX for subplot titles)."""
    return TITLE_LINE_PX * (wrap_title(text).count("<br>") + 1) + TITLE_GAP_PX + below


def top_title(text: str) -> dict:
    """A title at the top of the figure, under the toolbar's band: for a figure with labels above its
    plot (a top axis), which `margin(t=…)` leaves room for below the title."""
    return plot_title(text) | dict(yref="container", y=1, yanchor="top") | hung_pad(wrap_title(text))


def hung_pad(wrapped: str, below: int = TITLE_GAP_PX) -> dict:
    """The pad of a title hung from the figure's top (`wrapped`: its text as wrapped): the toolbar's band above it,
    and HUNG_LINES_PX more for several lines, so that its first line sits where one line would."""
    return dict(pad=dict(t=TOOLBAR_PX + (HUNG_LINES_PX if "<br>" in wrapped else 0), b=below))


def run_title(run, text: str) -> str:
    """A figure's title for what it draws of `run` (a capture of heads, or anything with its
    `lens`, e.g. a token focus): `text`, then what the attentions hold when they are not the
    weights (`HeadArray.lens`)."""
    return f"{text} · {run.lens}" if run.lens else text


def margin(**changes: int) -> dict:
    """The figures' margins (room for the title on top), with `changes` to some sides; the top one
    (`t`: the room for a title and top labels) gets the toolbar's band (TOOLBAR_PX) added."""
    out = dict(l=10, r=10, t=40, b=10) | changes
    out["t"] += TOOLBAR_PX
    return out


def colorbar(title: str | None = None, *, thickness: int = 12) -> dict:
    """A slim colour bar, titled when `title` is given."""
    return dict(thickness=thickness) if title is None else dict(title=dict(text=title), thickness=thickness)


def scale_top(values: np.ndarray, rescale: bool) -> float:
    """Top of a 0-based colour scale: 1, or the shown values' maximum when rescaling."""
    return float(values.max()) if rescale and values.size and values.max() > 0 else 1.0


PEAK_ROOM = 0.06  # of an axis's span: a round tick this near the peak's is left out (their labels would overlap)


def peak_ticks(values: np.ndarray, ticks: tuple[float, ...] | None = None) -> dict:
    """An axis's ticks with one at the largest finite value, labelled with it to 3 decimals (a note that quotes the
    peak, "0.992 of the attention", finds it on the axis): `ticks` (default five round steps over the values' span
    and 0) and the peak; {} when there is none."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return {}
    peak = float(finite.max())
    if ticks is None:
        low = min(0.0, float(finite.min()))
        step = float(np.format_float_positional((peak - low) / 4, precision=1, fractional=False)) or 1.0
        ticks = tuple(float(t) for t in np.arange(np.floor(low / step) * step, peak + step / 2, step))
    span = (max(ticks + (peak,)) - min(ticks + (peak,))) or 1.0
    kept = [t for t in ticks if abs(t - peak) > PEAK_ROOM * span]
    values_ = sorted(kept + [peak])
    return dict(tickmode="array", tickvals=values_, ticktext=[f"{v:.3f}" if v == peak else f"{v:g}" for v in values_])


def swatch_bars(entries: list[tuple[str, str]], group: str) -> list[dict]:
    """Bars in several colours (one trace, kept out of the legend) named in the legend: an empty bar trace per
    (name, colour), in the bars' `group` (their offsetgroup, so grouped bars keep their width). Issue 90: a bar
    trace in the legend shows one swatch, whatever colours its bars take."""
    return [dict(type="bar", x=[None], y=[None], marker=dict(color=colour), name=name, offsetgroup=group,
                 hoverinfo="skip") for name, colour in entries]


def symmetric_bound(values: np.ndarray) -> float:
    """The largest |value| among the finite ones (1 if none): a diverging scale spans ± this."""
    finite = values[np.isfinite(values)]
    return float(np.abs(finite).max()) if finite.size else 1.0


def token_map_layout(n: int, x_title: str, y_title: str, *, show_labels: bool = True) -> dict:
    """Axes and height of an n × n token-by-token heatmap: keys labelled below the map (long
    rotated labels never run into the title), queries top to bottom, labels up to 160 tokens."""
    show = show_labels and n <= 160
    return dict(
        xaxis=dict(title=dict(text=x_title), side="bottom", tickangle=-60, type="category",
                   showticklabels=show),
        yaxis=dict(title=dict(text=y_title), autorange="reversed", type="category", showticklabels=show),
        height=int(min(900, max(360, 22 * n + 140))),
    )


# --- downloading a chart (Plotly's own camera button, in the browser: no server, no internet) ---
DOWNLOAD_FORMATS = ("png", "svg")
# name -> (width, height, scale) in CSS pixels; None: the size the chart has on screen
DOWNLOAD_SIZES = {
    "as shown, 2× pixels": (None, None, 2),
    "slide, 16:9 (1920 × 1080 px)": (1280, 720, 1.5),
    "paper, full width (7 in at 300 dpi)": (1050, 750, 2),
    "paper, one column (3.5 in at 300 dpi)": (700, 560, 1.5),
}


def download_config(fmt: str = "png", size: str = "as shown, 2× pixels", filename: str = "mha-viz") -> dict:
    """Plotly `config` whose camera button downloads the chart as `fmt` (png or svg) at `size`
    (a key of DOWNLOAD_SIZES): a PNG at scale 2 of a 1050-px-wide chart is 2,100 px, 7 in at 300 dpi.
    Unknown values fall back to PNG as shown."""
    fmt = fmt if fmt in DOWNLOAD_FORMATS else "png"
    width, height, scale = DOWNLOAD_SIZES.get(size, DOWNLOAD_SIZES["as shown, 2× pixels"])
    options = {"format": fmt, "filename": safe_filename(filename), "scale": scale if fmt == "png" else 1}
    if width is not None:
        options |= {"width": width, "height": height}
    return {"displaylogo": False, "toImageButtonOptions": options, "modeBarButtonsToRemove": list(TOOLBAR_REMOVED)}


# The toolbar keeps the camera, zoom, pan and reset: short enough for one row over a narrow chart (a
# 260-px layers × heads grid), where Plotly's full toolbar would wrap into rows below the band. No
# chart selects by box or lasso unless it asks to (`ui.charts.show`: the heads scatter); a click selects a point.
TOOLBAR_REMOVED = ("select2d", "lasso2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "toggleSpikelines",
                   "hoverClosestCartesian", "hoverCompareCartesian")


def safe_filename(name: str, default: str = "mha-viz") -> str:
    """`name` as a file name: letters, digits, '-', '_' and '.', at most 80 characters."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(name)).strip("-.")[:80]
    return cleaned or default
