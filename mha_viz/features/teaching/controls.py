"""The page *Teaching: step by step*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

TEACH_DEMO = "teach_demo"
TEACH_PART = "teach_part"  # which part of the page is drawn: a group of steps, the costs, the demonstrations
TEACH_ROW = "teach_row"
TEACH_START = "teach_start"  # the walkthrough's window: its first token (Teaching and Queries and keys share it)

# the walkthrough's window (`ui.walk_window`): Teaching and Queries and keys share it
WALK_START = vp.number(TEACH_START, 0, upto=vp.TOKENS, default=0)

CONTROLS = (
    vp.choice(TEACH_PART, ("1–2 · Input, Q, K, V", "3–6 · Scores to probabilities", "7–9 · Output",
                                "What it costs", "Demonstrations"), default="1–2 · Input, Q, K, V"),
    vp.choice(TEACH_DEMO, ("Why projections", "Why several heads", "Masks")),
    vp.number(TEACH_ROW, 0, 63, upto=vp.TOKENS, default=lambda cur: min(vp.tokens_of(cur), 64) // 2),
    WALK_START,
)
