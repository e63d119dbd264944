"""The feature *Retrieval heads*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.retrieval.controls import CONTROLS
from mha_viz.features.retrieval.figures import needle_look, retrieval_grid
from mha_viz.features.retrieval.notebook import cells

FEATURE = Feature("retrieval", "Retrieval heads", "Measure", 80, ":material/manage_search:", notebook=cells,
                  controls=CONTROLS,
                  summary=("The heads that copy a needle planted far back in a long text (Wu et al. 2024; "
                          "`mha_viz.tasks.find_retrieval`)."),
                  figures=(retrieval_grid, needle_look))
