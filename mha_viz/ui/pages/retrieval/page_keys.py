"""The session keys of the page *Retrieval heads* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/retrieval/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.retrieval import controls as _retrieval

RETRIEVAL_LENGTH = _retrieval.RETRIEVAL_LENGTH  # Retrieval heads: the prompt's length and the needle's depths
RETRIEVAL_DEPTHS = _retrieval.RETRIEVAL_DEPTHS
RETRIEVAL_GO = "retrieval_go"  # buttons
RETRIEVAL_CANCEL = "retrieval_cancel"
RETRIEVAL_GRID = "retrieval_grid"  # the grid's selection event
RETRIEVAL_LOOK = "retrieval_look"
RETRIEVAL_LAYER = "retrieval_layer"
RETRIEVAL_HEAD = "retrieval_head"
RETRIEVAL_RUNNING = "_retrieval_running"  # what the job was for: still here on the next run if cancelled
RETRIEVAL_FOUND = "_retrieval_found"  # (what it was for, `tasks.retrieval.Retrieval`): the session's last result

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn
NOT_KEPT = frozenset({RETRIEVAL_LAYER, RETRIEVAL_HEAD})
