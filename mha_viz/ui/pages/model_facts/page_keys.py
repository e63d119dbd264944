"""The session keys of the page *Model facts* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/model_facts/controls.py`) and are named here too."""

from __future__ import annotations

# views
DL_FACTS = "dl_facts"
