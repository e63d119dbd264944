"""The session keys of the page *Teaching: step by step* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/teaching/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.teaching import controls as _teaching

TEACH_DEMO = _teaching.TEACH_DEMO
TEACH_PART = _teaching.TEACH_PART
TEACH_ROW = _teaching.TEACH_ROW
TEACH_PICK = "teach_pick"  # "induction": open the teaching view on toy-induction's induction head
TEACH_LAYER = "teach_layer"
TEACH_HEAD = "teach_head"
# teaching_page
TEACH_DEMO_HEAD_PREFIX = "demo_head_"
TEACH_DEMO_MEAN = "demo_mean"
TEACH_GQA = "teach_gqa"
TEACH_SOFTMAX_ROW = "teach_softmax_row"
TEACH_STEP2_PREFIX = "step_2_"
TEACH_STEP_PREFIX = "step_"
TEACH_USE_TOY = "use_toy"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn; and positions and ranges of
# the run on screen, clamped to each new run and meant to start afresh with it
NOT_KEPT = frozenset({TEACH_LAYER, TEACH_HEAD, TEACH_ROW})
