"""The page *Token focus*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import shared_controls
from mha_viz.export import view_params as vp
from mha_viz.views import focus

CROSS_FOCUS_RESCALE = "cross_focus_rescale"
CROSS_FOCUS_SIDE = "cross_focus_side"
CROSS_FOCUS_TOKEN = "cross_focus_token"
FOCUS_RESCALE = "focus_rescale"
FOCUS_SHOW = "focus_show"  # which direction(s) to draw
FOCUS_SUMMARIES = "focus_summaries"  # the four summary panels and the strongest-head map (off: two grids)


def opening_position(causal: bool, count: int) -> int:
    """The position the page opens on, of `count` tokens (or words): a causal run's last, whose row reads every one
    before it (the second's reads the first two, most of it the first: a sink's row); else the second, past [CLS]
    or <s>, where there is one. The same rule at both levels: a words link whose word is the tokens' default is one of
    a text whose words are its tokens."""
    return count - 1 if causal else min(1, count - 1)


CONTROLS = (
    vp.number(shared_controls.FOCUS_TOKEN, 0, upto=vp.TOKENS,
              default=lambda cur: opening_position(cur.run.is_causal, cur.run.n)),
    vp.choice(shared_controls.FOCUS_LEVEL, ("tokens", "words"), default="tokens"),
    vp.choice(FOCUS_SHOW, ("both", focus.TO, focus.BY), default="both"),
    vp.flag(FOCUS_RESCALE),
    vp.flag(FOCUS_SUMMARIES),
    vp.number(shared_controls.FOCUS_KEY, 0, upto=vp.TOKENS),
    # an encoder–decoder's cross-attention (the sidebar's part *Cross*)
    vp.choice(CROSS_FOCUS_SIDE),
    vp.number(CROSS_FOCUS_TOKEN, 0, default=0),
    vp.flag(CROSS_FOCUS_RESCALE),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
FOCUS_GRID_PREFIX = "focus_grid_"
FOCUS_HEADS_PREFIX = "focus_heads_"
FOCUS_SUMMARY_PREFIX = "focus_summary_"

# its inputs drawn without persist_state=KEEP: positions of the run on screen, clamped to each new run
NOT_KEPT = frozenset({CROSS_FOCUS_TOKEN})
