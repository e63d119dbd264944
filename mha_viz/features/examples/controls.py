"""The page *Head examples*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

EXAMPLES_RANK = "examples_rank"
EXAMPLES_X = "examples_x"  # the finder's axes, ranking
EXAMPLES_Y = "examples_y"

CONTROLS = tuple(vp.choice(key) for key in (EXAMPLES_X, EXAMPLES_Y, EXAMPLES_RANK))

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
EXAMPLES_LAYER = "examples_layer"
EXAMPLES_HEAD = "examples_head"
EXAMPLES_FINDER = "examples_finder"  # the finder's selection event
EXAMPLES_TO_CORPUS = "examples_to_corpus"
EXAMPLES_DISTANCES = "examples_distances"
EXAMPLES_SCORES = "examples_scores"
EXAMPLES_TOKENS_PREFIX = "examples_"

NOT_KEPT = vp.head_pickers(EXAMPLES_LAYER, EXAMPLES_HEAD)  # its inputs drawn without persist_state=KEEP
