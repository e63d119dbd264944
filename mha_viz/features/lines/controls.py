"""The page *Line view*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

LINE_HEADS = "line_heads"
LINE_LAYER = "line_layer"
LINE_SIDE = "line_side"  # LINE_TOKEN: -1 = no focus
LINE_THRESHOLD = "line_threshold"
LINE_TOKEN = "line_token"
LINE_WINDOW = "line_window"

CONTROLS = (
    vp.number(LINE_LAYER, 0, upto=vp.LAYERS),
    vp.picks(LINE_HEADS, upto=vp.HEADS, default=lambda cur: list(range(cur.run.num_heads))),
    vp.number(LINE_THRESHOLD, 0, 1, integer=False, default=0.0),
    vp.choice(LINE_SIDE, ("query", "key"), default="query"),
    vp.number(LINE_TOKEN, -1, upto=vp.TOKENS, default=-1),
    vp.span(LINE_WINDOW, default=(0, 128)),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
LINE_CHART = "line_chart"  # the line chart's selection event (a click on a token focuses it)
LINE_CLEAR = "line_clear"
