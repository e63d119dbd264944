"""The page *Model view*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

GRID_RESCALE = "grid_rescale"

CONTROLS = (vp.flag(GRID_RESCALE, default=True),)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
GRID_OPEN_HEAD = "open_head"
LEARNED_SINK_GRID = "learned_sink_grid"
LENS_JS_GRID = "lens_js_grid"
SINK_MASS_GRID = "sink_mass_grid"
