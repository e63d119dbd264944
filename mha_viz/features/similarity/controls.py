"""The page *Head similarity*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.metrics.measures import SIMILARITIES

DIV_BASELINE = "div_baseline"
MAP_COLOUR = "map_colour"
SIM_KIND = "sim_kind"
SIM_ORDER = "sim_order"

CONTROLS = (
    vp.choice(SIM_KIND, tuple(SIMILARITIES)),
    vp.choice(SIM_ORDER, ("by layer", "clustered"), default="by layer"),
    vp.choice(MAP_COLOUR, ("layer", "pattern"), default="layer"),
    vp.flag(DIV_BASELINE, default=None),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
DIV_CHART = "div_chart"
DIV_TABLE = "div_table"
DL_SIM = "dl_sim"
HEAD_MAP = "head_map"
SIM_MATRIX = "sim_matrix"
SIM_START = "sim_start"  # the button that starts a comparison of every pair of heads whose cost was stated
