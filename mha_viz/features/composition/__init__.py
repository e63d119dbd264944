"""The feature *Head composition*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.composition.controls import CONTROLS

MAIN = """
scores = mha_viz.circuits.composition_scores(model)  # q, k, v
figures.grid(mha_viz.circuits.copying_scores(model), title="Copying score of each head")
"""  # the page's main figure, from the same run

FEATURE = Feature("composition", "Head composition", "Measure", 30, ":material/account_tree:",
                  notebook=main_figure("Head composition", MAIN),
                  controls=CONTROLS,
                  summary="Q-, K- and V-composition and copying scores from the weights.")
