"""The page *Retrieval heads*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

RETRIEVAL_LENGTH = "retrieval_length"  # the prompt's tokens, the needle in it
RETRIEVAL_DEPTHS = "retrieval_depths"  # where the needle goes, in % of the haystack
DEPTHS = (10, 25, 50, 75, 90)
DEFAULT_DEPTHS = (10, 50, 90)
DEFAULT_LENGTH = 1024
MIN_LENGTH = 32

CONTROLS = (vp.number(RETRIEVAL_LENGTH, MIN_LENGTH, 131_072), vp.picks(RETRIEVAL_DEPTHS, DEPTHS))
