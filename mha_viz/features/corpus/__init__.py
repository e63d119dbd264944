"""The feature *Corpus*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.corpus.controls import CONTROLS
from mha_viz.features.corpus.notebook import cells

FEATURE = Feature("corpus", "Corpus", "Measure", 40, ":material/library_books:", notebook=cells,
                  controls=CONTROLS,
                  summary="Every head's measures over many documents, and how this text deviates from them.")
