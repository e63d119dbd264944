"""The session keys of the page *Across layers* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/across_layers/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.across_layers import controls as _across_layers

LAYERS_HEAD = _across_layers.LAYERS_HEAD
LAYERS_LAYER = _across_layers.LAYERS_LAYER
LAYERS_METHOD = _across_layers.LAYERS_METHOD
LAYERS_BULK = _across_layers.LAYERS_BULK
DL_LAYERS = "dl_layers"
LAYERS_MATRIX = "layers_matrix"
LAYERS_START = "layers_start"  # accepts a long rollout of one layer alone (cost_prompt.accepted)

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the layer and head of the run on
# screen, clamped to each new run and meant to start afresh with it
NOT_KEPT = frozenset({LAYERS_LAYER, LAYERS_HEAD})
