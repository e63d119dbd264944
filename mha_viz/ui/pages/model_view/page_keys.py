"""The session keys of the page *Model view* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/model_view/controls.py`) and are named here too."""

from __future__ import annotations

GRID_OPEN_HEAD = "open_head"
LEARNED_SINK_GRID = "learned_sink_grid"
LENS_JS_GRID = "lens_js_grid"
SINK_MASS_GRID = "sink_mass_grid"
