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

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why),
# and its other keys that the kit's keys held
CORPUS_SOURCE = "corpus_source"  # the bundled sample, an upload or a path
CORPUS_FILE = "corpus_file"  # the uploader
CORPUS_PATH = "corpus_path"
CORPUS_COLUMN = "corpus_column"  # the text column of a .jsonl / .csv
CORPUS_ENGINE = "corpus_engine"
CORPUS_IMPORTANCE = "corpus_importance"
CORPUS_SCATTER_CHART = "corpus_scatter_chart"
CORPUS_SCATTER_PICKED = "_corpus_scatter_picked"
CORPUS_SCATTER_COMPARE = "corpus_scatter_compare"

CONTROLS = (
    vp.choice(CORPUS_METRIC, tuple(METRICS), default=next(iter(METRICS))),
    vp.number(CORPUS_TOKENS, 2, 512, default=128),
    vp.number(CORPUS_FIRST, 0, default=0),
    vp.choice(CORPUS_BATCH, (8, 16, 32), default=16),
    *scatter(CORPUS_SCATTER_X, CORPUS_SCATTER_Y, CORPUS_SCATTER_COLOUR),
    *vp.local("a corpus' documents (the source, an upload, a path on the server, a file's text column): too big "
              "for a link", CORPUS_SOURCE, CORPUS_FILE, CORPUS_PATH, CORPUS_COLUMN),
    *vp.local("how the statistics are computed, not what they show (importance: set afresh for each model, by its "
              "cost)", CORPUS_ENGINE, CORPUS_IMPORTANCE),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
CORPUS_GO = "corpus_go"  # buttons
CORPUS_CANCEL = "corpus_cancel"
CORPUS_PRUNE = "corpus_prune"
CORPUS_TO_EXAMPLES = "corpus_to_examples"
CORPUS_RUNNING = "_corpus_running"  # the CorpusKey being computed: still here on the next run if cancelled
CORPUS_DOCS = "_corpus_docs"  # (source, its texts, the cut, Documents): the last corpus read by this session
CORPUS_MODEL_SEEN = "_corpus_model"  # the model the importance default was set for
CORPUS_PRUNED = "_corpus_pruned"  # {CorpusKey: DataFrame}: pruning curves on the held-out documents
CORPUS_DEVIATION = "corpus_deviation"
CORPUS_IMPORTANCE_GRID = "corpus_importance_grid"
CORPUS_MEAN = "corpus_mean"
CORPUS_PATTERNS = "corpus_patterns"
CORPUS_PRUNING = "corpus_pruning"
CORPUS_SD = "corpus_sd"
CORPUS_VERSUS = "corpus_versus"
DL_CORPUS = "dl_corpus"
DL_CORPUS_PRUNE = "dl_corpus_prune"
# its inputs drawn without persist_state=KEEP: the upload (the documents read from it are kept, not the browser's file)
NOT_KEPT = frozenset({CORPUS_FILE})
