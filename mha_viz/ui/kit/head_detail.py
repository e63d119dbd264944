"""The head view's level of detail (every token, a window, blocks, words, or chosen queries and
keys): its options for a run, the one a run opens on, and choosing or reading it from outside the
page (a link carries it: `links`)."""

from __future__ import annotations

from mha_viz.drawing import heads as head_figures
from mha_viz.ui.kit import keys, session
from mha_viz.views import detail

FULL, WINDOW, BLOCKS, WORDS = "every token", "a token window", "all tokens, in blocks", "words"
SUBSET = "chosen queries and keys"  # subset_views: a range of queries over a range of keys


def detail_options(n: int) -> list[str]:
    """The levels offered for n tokens (every token only up to `detail.MAX_FULL_TOKENS`)."""
    return ([FULL, WINDOW, BLOCKS, WORDS] if n <= detail.MAX_FULL_TOKENS else [WINDOW, BLOCKS, WORDS]) + [SUBSET]


def default_detail(n: int) -> str:
    """The level a run of n tokens opens on: every token for a short input, else blocks
    (`head_figures.default_level`: every token of every pair would be n² cells to send and to see)."""
    return FULL if head_figures.default_level(n) == head_figures.TOKENS else BLOCKS


def choose_detail(option: str) -> None:
    """Open the head view on this level (a link's), kept when the new run arrives."""
    session.put_all((keys.HEAD_DETAIL, keys.DETAIL_LINKED), (option, True))


def detail_choice() -> str | None:
    """The level the head view shows (its radio's value), None before it is drawn."""
    return session.get(keys.HEAD_DETAIL)
