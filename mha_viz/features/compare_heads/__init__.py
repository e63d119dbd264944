"""The feature *Compare heads*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.compare_heads.controls import CONTROLS

MAIN = """
figures.head(run, LAYER, HEAD)
"""  # the page's main figure, from the same run

FEATURE = Feature("compare_heads", "Compare heads", "Look", 50, ":material/compare:",
                  notebook=main_figure("Compare heads", MAIN),
                  controls=CONTROLS,
                  summary="Heads side by side on one colour scale.")
