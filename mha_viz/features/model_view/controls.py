"""The page *Model view*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

GRID_RESCALE = "grid_rescale"

CONTROLS = (vp.flag(GRID_RESCALE, default=True),)
