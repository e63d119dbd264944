"""The feature *Head similarity*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.similarity.controls import CONTROLS

MAIN = """
figures.similarity(run, "js")
"""  # the page's main figure, from the same run

FEATURE = Feature("similarity", "Head similarity", "Measure", 20, ":material/hub:",
                  notebook=main_figure("Head similarity", MAIN),
                  controls=CONTROLS,
                  summary="How alike the heads' patterns are, and how diverse a layer's heads.")
