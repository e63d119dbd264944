"""The feature *Token focus*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.focus.controls import CONTROLS

MAIN = """
figures.token_focus(run, 0)  # the first token; the page's token may differ
"""  # the page's main figure, from the same run

FEATURE = Feature("focus", "Token focus", "Look", 30, ":material/center_focus_strong:",
                  notebook=main_figure("Token focus", MAIN),
                  controls=CONTROLS,
                  summary="One token: what it attends to and what attends to it, in every head.")
