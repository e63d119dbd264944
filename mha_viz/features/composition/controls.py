"""The page *Head composition*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

COMP_ABOVE = "comp_above"
COMP_KIND = "comp_kind"  # Head composition: Q, K or V; shown above × the baseline

CONTROLS = (
    vp.choice(COMP_KIND, ("q", "k", "v"), default="q"),
    vp.number(COMP_ABOVE, 0, 5, integer=False, default=2.0),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
COMP_MATRIX = "comp_matrix"  # its charts and table
COMP_TABLE = "comp_table"
COMP_COPYING = "comp_copying"
COMP_GO = "comp_go"  # Head composition: compute a large model's scores
