"""The session keys of the page *Head similarity* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/similarity/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.similarity import controls as _similarity

DIV_BASELINE = _similarity.DIV_BASELINE
MAP_COLOUR = _similarity.MAP_COLOUR
SIM_KIND = _similarity.SIM_KIND
SIM_ORDER = _similarity.SIM_ORDER
DIV_CHART = "div_chart"
DIV_TABLE = "div_table"
DL_SIM = "dl_sim"
HEAD_MAP = "head_map"
SIM_MATRIX = "sim_matrix"
SIM_START = "sim_start"  # the button that starts a comparison of every pair of heads whose cost was stated
