"""The page *Compare texts or models*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.metrics.measures import METRICS

CMP_METRIC = "cmp_metric"  # models of different shapes: the metric compared by depth
CMP_RESCALE = "cmp_rescale"

CONTROLS = (vp.flag(CMP_RESCALE), vp.choice(CMP_METRIC, tuple(METRICS), default=next(iter(METRICS))))
