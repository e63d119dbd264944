"""The page *Corpus*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.export.shared_controls import scatter
from mha_viz.metrics.measures import METRICS

CORPUS_BATCH = "corpus_batch"
CORPUS_FIRST = "corpus_first"  # use the corpus's first N documents only (0: all)
CORPUS_METRIC = "corpus_metric"
CORPUS_SCATTER_COLOUR = "corpus_scatter_colour"
CORPUS_SCATTER_X = "corpus_scatter_x"  # every head on two measures
CORPUS_SCATTER_Y = "corpus_scatter_y"
CORPUS_TOKENS = "corpus_tokens"  # tokens per document

CONTROLS = (
    vp.choice(CORPUS_METRIC, tuple(METRICS), default=next(iter(METRICS))),
    vp.number(CORPUS_TOKENS, 2, 512, default=128),
    vp.number(CORPUS_FIRST, 0, default=0),
    vp.choice(CORPUS_BATCH, (8, 16, 32), default=16),
    *scatter(CORPUS_SCATTER_X, CORPUS_SCATTER_Y, CORPUS_SCATTER_COLOUR),
)
