"""The controls two features share, each defined once so that a feature's folder imports no other's and the kit's
widgets name no feature: *Why here?*'s cell, the token in focus, the heads compared and the heads switched off
(below), the heads on two measures (the Head metrics and Corpus pages, each under its own keys) and the
walkthrough's window (Teaching and Queries and keys, under one key, so that both pages show the same tokens), and the
pair of texts *Heads behind a prediction* and *Circuit behind a prediction* both read (one form, `ui/shell/pair.py`)."""

from __future__ import annotations

from mha_viz.drawing.scatter import COLOURS, DEFAULT_X, DEFAULT_Y, LAYER
from mha_viz.export import view_params as vp
from mha_viz.export.link_params import MAX_TEXT_CHARS, MAX_TOKEN_CHARS
from mha_viz.metrics.measures import METRICS

# the controls one feature's page and another's (or a shared widget of the kit) both read or set:
WHY_QUERY = "why_query"  # *Why here?*'s cell (the Head view; Token focus opens it): its query, key and the key it is
WHY_KEY = "why_key"  # set against, and the whole head's pattern-weighted terms instead of one cell
WHY_SECOND = "why_second"
WHY_PATTERN = "why_pattern"
FOCUS_TOKEN = "focus_token"  # Token focus's token (or word) in focus, and the key it looks at (the Head view's
FOCUS_KEY = "focus_key"  # button opens the page on a cell's pair), at the level of tokens or words
FOCUS_LEVEL = "focus_level"
COMPARE_HEADS = "compare_heads"  # the heads Compare heads draws: Head metrics', Corpus' and Head composition's picks
HEADS_OFF = "heads_off"  # the heads switched off, by label (Switch heads off; every link): no widget's value
TEACH_START = "teach_start"  # the walkthrough's window: its first token
WALK_START = vp.number(TEACH_START, 0, upto=vp.TOKENS, default=0)
PRED_CORRUPTED = "pred_corrupted"  # the pair: the corrupted text (the clean one is the sidebar's)
PRED_ANSWER = "pred_answer"  # its answer and wrong tokens as typed; empty: each run's prediction
PRED_WRONG = "pred_wrong"
PAIR = (vp.text(PRED_CORRUPTED, MAX_TEXT_CHARS, param="corrupted"),  # links carry them under their own names
        vp.text(PRED_ANSWER, MAX_TOKEN_CHARS, param="answer"), vp.text(PRED_WRONG, MAX_TOKEN_CHARS, param="wrong"))


def scatter(x: str, y: str, colour: str) -> tuple[vp.Control, ...]:
    """The choices of a page's heads on two measures (`ui.head_scatter_view`), under the keys x, y and colour."""
    return (vp.choice(x, tuple(METRICS), default=DEFAULT_X), vp.choice(y, tuple(METRICS), default=DEFAULT_Y),
            vp.choice(colour, COLOURS, default=LAYER))
