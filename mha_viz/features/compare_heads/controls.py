"""The page *Compare heads*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

COMPARE_HEADS = "compare_heads"
COMPARE_RESCALE = "compare_rescale"  # Compare heads: each head on its own 0..max

CONTROLS = (vp.picks(COMPARE_HEADS, text=True), vp.flag(COMPARE_RESCALE, default=None))
