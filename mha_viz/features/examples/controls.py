"""The page *Head examples*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

EXAMPLES_RANK = "examples_rank"
EXAMPLES_X = "examples_x"  # the finder's axes, ranking
EXAMPLES_Y = "examples_y"

CONTROLS = tuple(vp.choice(key) for key in (EXAMPLES_X, EXAMPLES_Y, EXAMPLES_RANK))
