"""The feature *Compare texts or models*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.compare.controls import CONTROLS
from mha_viz.features.compare.figures import compare

MAIN = """
figures.model_grid(run)  # the first run; the page's second text or model is not carried over
"""  # the page's main figure, from the same run

FEATURE = Feature("compare", "Compare texts or models", "Measure", 60, ":material/difference:",
                  notebook=main_figure("Compare texts or models", MAIN),
                  controls=CONTROLS,
                  summary="Two runs side by side: two texts, or two models on one text.",
                  figures=(compare,), picks_head=True)
