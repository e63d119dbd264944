"""The session keys of the page *Compare heads* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/compare_heads/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.compare_heads import controls as _compare_heads

COMPARE_RESCALE = _compare_heads.COMPARE_RESCALE
# the metric pages
CMP_HEATMAP_PREFIX = "cmp_"
CMP_PAIRS = "cmp_pairs"
CMP_TABLE = "cmp_table"
PAIRS_OPEN = "cmp_pairs_open"  # its *Pairwise comparisons* on a long run (a pass over the picked heads' rows)
PAIRS_WAS_OPEN = "_cmp_pairs_open"
