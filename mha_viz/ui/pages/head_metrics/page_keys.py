"""The session keys of the page *Head metrics* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/head_metrics/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.head_metrics import controls as _head_metrics

METRIC_CHOICE = _head_metrics.METRIC_CHOICE
DL_TABLE = "dl_table"
HEAD_TABLE_DF = "head_table_df"
METRIC_GRID = "metric_grid"
METRIC_TYPES = "metric_types"  # the grid of head types (its selection events)
ROLE_MAP = "role_map"  # a chat's head map: the system prompt against the question (its selection events)
ROLE_TABLE = "role_table"
