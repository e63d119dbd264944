"""The feature *Model facts*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure

MAIN = """
model.facts()
"""  # the page's main figure, from the same run

FEATURE = Feature("model_facts", "Model facts", "About", 10, ":material/info:",
                  notebook=main_figure("Model facts", MAIN),
                  summary="What the model is: its family, shapes, precision and what it refuses.")
