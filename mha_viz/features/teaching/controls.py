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

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
TEACH_PICK = "teach_pick"  # "induction": open the teaching view on toy-induction's induction head
TEACH_LAYER = "teach_layer"
TEACH_HEAD = "teach_head"
TEACH_DEMO_HEAD_PREFIX = "demo_head_"
TEACH_DEMO_MEAN = "demo_mean"
TEACH_GQA = "teach_gqa"
TEACH_SOFTMAX_ROW = "teach_softmax_row"
TEACH_STEP2_PREFIX = "step_2_"
TEACH_STEP_PREFIX = "step_"
TEACH_USE_TOY = "use_toy"

# its inputs drawn without persist_state=KEEP: the shared head's pickers, and the row of the run on screen, clamped
# to each new run and meant to start afresh with it
NOT_KEPT = vp.head_pickers(TEACH_LAYER, TEACH_HEAD) | {TEACH_ROW}
