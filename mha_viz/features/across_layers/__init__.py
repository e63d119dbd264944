"""The feature *Across layers*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.across_layers.controls import CONTROLS

MAIN = """
figures.rollout(run)
"""  # the page's main figure, from the same run

FEATURE = Feature("across_layers", "Across layers", "Look", 60, ":material/stacked_line_chart:",
                  notebook=main_figure("Across layers", MAIN),
                  controls=CONTROLS,
                  summary="Attention carried across layers: rollout and flow.")
