"""The session keys of the page *Line view* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/lines/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.lines import controls as _lines

LINE_HEADS = _lines.LINE_HEADS
LINE_LAYER = _lines.LINE_LAYER
LINE_SIDE = _lines.LINE_SIDE
LINE_THRESHOLD = _lines.LINE_THRESHOLD
LINE_TOKEN = _lines.LINE_TOKEN
LINE_WINDOW = _lines.LINE_WINDOW
LINE_CHART = "line_chart"  # the line chart's selection event (a click on a token focuses it)
# lines_page
LINE_CLEAR = "line_clear"
