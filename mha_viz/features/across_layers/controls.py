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
