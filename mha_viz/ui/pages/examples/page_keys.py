"""The session keys of the page *Head examples* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/examples/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.examples import controls as _examples

EXAMPLES_RANK = _examples.EXAMPLES_RANK
EXAMPLES_X = _examples.EXAMPLES_X
EXAMPLES_Y = _examples.EXAMPLES_Y
EXAMPLES_LAYER = "examples_layer"
EXAMPLES_HEAD = "examples_head"
EXAMPLES_FINDER = "examples_finder"  # the finder's selection event
EXAMPLES_TO_CORPUS = "examples_to_corpus"
# examples_page
EXAMPLES_DISTANCES = "examples_distances"
EXAMPLES_SCORES = "examples_scores"
EXAMPLES_TOKENS_PREFIX = "examples_"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn
NOT_KEPT = frozenset({EXAMPLES_LAYER, EXAMPLES_HEAD})
