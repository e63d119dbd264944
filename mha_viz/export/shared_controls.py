"""The controls two features share, each defined once so that a feature's folder imports no other's: the heads on
two measures (the Head metrics and Corpus pages, each under its own keys) and the walkthrough's window (Teaching
and Queries and keys, under one key, so that both pages show the same tokens)."""

from __future__ import annotations

from mha_viz.drawing.scatter import COLOURS, DEFAULT_X, DEFAULT_Y, LAYER
from mha_viz.export import view_params as vp
from mha_viz.metrics.measures import METRICS

TEACH_START = "teach_start"  # the walkthrough's window: its first token
WALK_START = vp.number(TEACH_START, 0, upto=vp.TOKENS, default=0)


def scatter(x: str, y: str, colour: str) -> tuple[vp.Control, ...]:
    """The choices of a page's heads on two measures (`ui.head_scatter_view`), under the keys x, y and colour."""
    return (vp.choice(x, tuple(METRICS), default=DEFAULT_X), vp.choice(y, tuple(METRICS), default=DEFAULT_Y),
            vp.choice(colour, COLOURS, default=LAYER))
