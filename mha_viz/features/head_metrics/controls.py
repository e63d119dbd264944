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
