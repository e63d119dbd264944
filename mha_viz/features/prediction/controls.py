"""The page *Heads behind a prediction*'s controls and session keys. Its pair is shared with *Circuit behind a
prediction* (`shared_controls.PAIR`, drawn by the shell's `pair`), carried by links as corrupted, answer and wrong;
the layer of the estimate by position is local (it follows the chosen head)."""

from __future__ import annotations

from mha_viz.export import shared_controls
from mha_viz.export import view_params as vp

PRED_POS_LAYER = "pred_pos_layer"  # the layer of the head × position estimate grid

CONTROLS = (*shared_controls.PAIR,
            *vp.local("the layer of the estimate by position follows the chosen head", PRED_POS_LAYER))

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
PRED_GO = "pred_go"
PRED_CANCEL = "pred_cancel"
PRED_RESULT = "_pred_result"  # (pair.Pair, prediction.Explanation) of the last result
PRED_RUNNING = "_pred_running"  # set while the estimate runs: still here on the next run when it was cancelled
PRED_EXTRA = "_pred_extra"  # {(pair.Pair, layer, head, what): result} of the one-head panel
PRED_LAYER = "pred_layer"  # the head opened in the one-head panel
PRED_HEAD = "pred_head"
PRED_DLA_GRID = "pred_dla_grid"  # the grids' selection events
PRED_RESTORED_GRID = "pred_restored_grid"
PRED_ESTIMATE_GRID = "pred_estimate_grid"
PRED_REAL_GO = "pred_real_go"  # real patching, after the estimate
PRED_REAL_CANCEL = "pred_real_cancel"
PRED_REAL_RUNNING = "_pred_real_running"  # set while real patching runs (as PRED_RUNNING)
PRED_POS_FOLLOWS = "_pred_pos_follows"  # the chosen head's row PRED_POS_LAYER was last set to (it follows the head)
DL_PRED = "dl_pred"
DL_PRED_POSITIONS = "dl_pred_positions"
PRED_CLEAN_HEAD = "pred_clean_head"
PRED_CORRUPTED_HEAD = "pred_corrupted_head"
PRED_POSITIONS = "pred_positions"
PRED_POSITION_GRID = "pred_position_grid"
PRED_SCATTER = "pred_scatter"
PRED_TOKENS = "pred_tokens"
PRED_WEIGHTED_HEAD = "pred_weighted_head"

NOT_KEPT = vp.head_pickers(PRED_LAYER, PRED_HEAD) | {PRED_POS_LAYER}  # and the layer by position, set from the head
