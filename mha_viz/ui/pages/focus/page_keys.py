"""The session keys of the page *Token focus* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/focus/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.focus import controls as _focus

FOCUS_RESCALE = _focus.FOCUS_RESCALE
FOCUS_SHOW = _focus.FOCUS_SHOW
FOCUS_SUMMARIES = _focus.FOCUS_SUMMARIES
# focus_page
FOCUS_GRID_PREFIX = "focus_grid_"
FOCUS_HEADS_PREFIX = "focus_heads_"
FOCUS_SUMMARY_PREFIX = "focus_summary_"
