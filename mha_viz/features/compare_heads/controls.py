"""The page *Compare heads*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import shared_controls
from mha_viz.export import view_params as vp

COMPARE_RESCALE = "compare_rescale"  # Compare heads: each head on its own 0..max

CONTROLS = (vp.picks(shared_controls.COMPARE_HEADS, text=True), vp.flag(COMPARE_RESCALE, default=None))

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
CMP_HEATMAP_PREFIX = "cmp_"
CMP_PAIRS = "cmp_pairs"
CMP_TABLE = "cmp_table"
PAIRS_OPEN = "cmp_pairs_open"  # its *Pairwise comparisons* on a long run (a pass over the picked heads' rows)
PAIRS_WAS_OPEN = "_cmp_pairs_open"

# its input drawn without persist_state=KEEP: heads of the run on screen, set afresh with each new run
NOT_KEPT = frozenset({shared_controls.COMPARE_HEADS})
