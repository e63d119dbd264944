"""The session keys of the page *Compare texts or models* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/compare/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.compare import controls as _compare

CMP_METRIC = _compare.CMP_METRIC
CMP_RESCALE = _compare.CMP_RESCALE
CMP_LAYER = "cmp_layer"  # the head shown side by side (a row of run A)
CMP_HEAD = "cmp_head"
CMP_GRID = "cmp_grid"  # the change grid's selection event (a click picks the head)
# compare_page
CMP_DEPTH = "cmp_depth"
CMP_SIDE = "cmp_side"
CMP_TABLE_DF = "cmp_table_df"
DL_CMP = "dl_cmp"
CMP_UNDO = "_cmp_undo"  # (the pair's two texts, the two they replaced): what a minimal pair's Undo puts back
CMP_UNDO_GO = "cmp_undo_go"
CMP_START = "cmp_start"  # the button that starts comparing two long runs head by head, its cost stated

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn
NOT_KEPT = frozenset({CMP_LAYER, CMP_HEAD})
