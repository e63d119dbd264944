"""The page *Model view*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

GRID_RESCALE = "grid_rescale"

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why),
# and its other keys that the kit's keys held
GRID_LAYER = "grid_layer"
GRID_HEAD = "grid_head"

CONTROLS = (
    vp.flag(GRID_RESCALE, default=True),
    *vp.local("a head a button opens: the link's layer and head say it", GRID_LAYER, GRID_HEAD),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
GRID_OPEN_HEAD = "open_head"
LEARNED_SINK_GRID = "learned_sink_grid"
LENS_JS_GRID = "lens_js_grid"
SINK_MASS_GRID = "sink_mass_grid"
# its inputs drawn without persist_state=KEEP: a layer and head of the run on screen, clamped to each new run
NOT_KEPT = frozenset({GRID_LAYER, GRID_HEAD})
