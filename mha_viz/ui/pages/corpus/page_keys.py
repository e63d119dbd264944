"""The session keys of the page *Corpus* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/corpus/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.corpus import controls as _corpus

CORPUS_BATCH = _corpus.CORPUS_BATCH
CORPUS_FIRST = _corpus.CORPUS_FIRST
CORPUS_METRIC = _corpus.CORPUS_METRIC
CORPUS_TOKENS = _corpus.CORPUS_TOKENS
CORPUS_GO = "corpus_go"  # buttons
CORPUS_CANCEL = "corpus_cancel"
CORPUS_PRUNE = "corpus_prune"
CORPUS_RUNNING = "_corpus_running"  # the CorpusKey being computed: still here on the next run if cancelled
CORPUS_DOCS = "_corpus_docs"  # (source, its texts, the cut, Documents): the last corpus read by this session
CORPUS_MODEL_SEEN = "_corpus_model"  # the model the importance default was set for
CORPUS_PRUNED = "_corpus_pruned"  # {CorpusKey: DataFrame}: pruning curves on the held-out documents
# corpus_page
CORPUS_DEVIATION = "corpus_deviation"
CORPUS_IMPORTANCE_GRID = "corpus_importance_grid"
CORPUS_MEAN = "corpus_mean"
CORPUS_PATTERNS = "corpus_patterns"
CORPUS_PRUNING = "corpus_pruning"
CORPUS_SD = "corpus_sd"
CORPUS_VERSUS = "corpus_versus"
DL_CORPUS = "dl_corpus"
DL_CORPUS_PRUNE = "dl_corpus_prune"
