"""The page *Head metrics*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.export.shared_controls import scatter
from mha_viz.metrics.cross_attention import COLUMNS as CROSS_COLUMNS
from mha_viz.metrics.measures import METRICS

CROSS_METRIC_CHOICE = "cross_metric_choice"
METRIC_CHOICE = "metric_choice"
SCATTER_COLOUR = "scatter_colour"
SCATTER_X = "scatter_x"
SCATTER_Y = "scatter_y"

CONTROLS = (vp.choice(METRIC_CHOICE, tuple(METRICS), default=next(iter(METRICS))),
            vp.choice(CROSS_METRIC_CHOICE, tuple(CROSS_COLUMNS), default=next(iter(CROSS_COLUMNS))),
            *scatter(SCATTER_X, SCATTER_Y, SCATTER_COLOUR))

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
DL_TABLE = "dl_table"
HEAD_TABLE_DF = "head_table_df"
METRIC_GRID = "metric_grid"
METRIC_TYPES = "metric_types"  # the grid of head types (its selection events)
ROLE_MAP = "role_map"  # a chat's head map: the system prompt against the question (its selection events)
ROLE_TABLE = "role_table"
SCATTER_CHART = "scatter_chart"  # every head on two measures: the chart (its selection events)
SCATTER_PICKED = "_scatter_picked"  # the heads a box or lasso picked
SCATTER_COMPARE = "scatter_compare"  # the button that compares them
