"""The page *Across layers*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

LAYERS_HEAD = "layers_head"
LAYERS_LAYER = "layers_layer"
LAYERS_METHOD = "layers_method"
LAYERS_BULK = "layers_bulk"  # colours up to the matrix's 99th percentile, not its maximum

CONTROLS = (
    vp.choice(LAYERS_METHOD, ("rollout", "rollout through one head", "flow"), default="rollout"),
    vp.number(LAYERS_LAYER, 0, upto=vp.LAYERS, default=lambda cur: cur.run.num_layers - 1),
    vp.number(LAYERS_HEAD, 0, upto=vp.HEADS, default=0),
    vp.flag(LAYERS_BULK, default=None),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
DL_LAYERS = "dl_layers"
LAYERS_MATRIX = "layers_matrix"
LAYERS_START = "layers_start"  # accepts a long rollout of one layer alone (cost_prompt.accepted)

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the layer and head of the run on
# screen, clamped to each new run and meant to start afresh with it
NOT_KEPT = frozenset({LAYERS_LAYER, LAYERS_HEAD})
