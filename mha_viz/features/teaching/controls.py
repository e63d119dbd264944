"""The page *Teaching: step by step*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.export.shared_controls import WALK_START  # its key, TEACH_START, shared with Queries and keys

TEACH_DEMO = "teach_demo"
TEACH_PART = "teach_part"  # which part of the page is drawn: a group of steps, the costs, the demonstrations
TEACH_ROW = "teach_row"

CONTROLS = (
    vp.choice(TEACH_PART, ("1–2 · Input, Q, K, V", "3–6 · Scores to probabilities", "7–9 · Output",
                                "What it costs", "Demonstrations"), default="1–2 · Input, Q, K, V"),
    vp.choice(TEACH_DEMO, ("Why projections", "Why several heads", "Masks")),
    vp.number(TEACH_ROW, 0, 63, upto=vp.TOKENS, default=lambda cur: min(vp.tokens_of(cur), 64) // 2),
    WALK_START,
)
