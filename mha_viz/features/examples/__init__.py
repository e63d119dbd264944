"""The feature *Head examples*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.examples.controls import CONTROLS

MAIN = """
ex = mha_viz.corpus.head_examples(model, "sample", max_tokens=CAP)
ex.top(LAYER, HEAD)
"""  # the page's main figure, from the same run

FEATURE = Feature("examples", "Head examples", "Measure", 50, ":material/format_quote:",
                  notebook=main_figure("Head examples", MAIN),
                  controls=CONTROLS,
                  summary="The corpus passages each head attends most in.")
