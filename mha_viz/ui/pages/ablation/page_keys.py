"""The session keys of the page *Switch heads off* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/ablation/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.ablation import controls as _ablation

ABLATE_MODE = _ablation.ABLATE_MODE
ABLATION_OTHER = _ablation.ABLATION_OTHER
IMP_SOURCE = _ablation.IMP_SOURCE
THIS_TEXT, SAMPLE = _ablation.THIS_TEXT, _ablation.SAMPLE
IMPORTANCE_DONE = "_imp_done"  # the AnalysisKeys whose importance was asked for
PRUNING_DONE = "_prune_done"
IMP_OPEN = "imp_open"  # the box *Which heads matter* (`boxes.lazy_box`): open now, and as last left
IMP_WAS_OPEN = "_imp_was_open"
RERUN_SECONDS = "_rerun_s"  # {the text's AnalysisKey: seconds its last pass with heads off took}
# ablation_page
DL_IMP = "dl_imp"
DL_PRUNE = "dl_prune"
HEADS_ALL_ON = "heads_all_on"
HEADS_GRID_PREFIX = "heads_grid_"
HEADS_LAYER_OFF = "heads_layer_off"
IMP_APPLY = "imp_apply"
IMP_GO = "imp_go"
IMP_GRID = "imp_grid"
PRUNE_FIG = "prune_fig"
PRUNE_GO = "prune_go"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the on/off grid, drawn under a new key
# whenever the app changes it (HEADS_ON keeps the heads)
NOT_KEPT = frozenset({HEADS_GRID_PREFIX})
