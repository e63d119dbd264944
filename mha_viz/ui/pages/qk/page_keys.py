"""The session keys of the page *Queries and keys* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/qk/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.qk import controls as _qk

QK_I = _qk.QK_I
QK_J = _qk.QK_J
QK_METHOD = _qk.QK_METHOD
QK_TOP = _qk.QK_TOP
QK_TRANSLATE = _qk.QK_TRANSLATE
QK_LAYER = "qk_layer"
QK_HEAD = "qk_head"
QK_MAP = "qk_map"  # the query/key map's selection event (a click on a query sets QK_I)
# qk_page
QK_NEURON = "qk_neuron"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn; and positions and ranges of
# the run on screen, clamped to each new run and meant to start afresh with it
NOT_KEPT = frozenset({QK_LAYER, QK_HEAD, QK_I, QK_J})
