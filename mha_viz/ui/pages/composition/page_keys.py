"""The session keys of the page *Head composition* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/composition/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.composition import controls as _composition

COMP_ABOVE = _composition.COMP_ABOVE
COMP_KIND = _composition.COMP_KIND
COMP_MATRIX = "comp_matrix"  # its charts and table
COMP_TABLE = "comp_table"
COMP_COPYING = "comp_copying"
COMP_GO = "comp_go"  # Head composition: compute a large model's scores
