"""The feature *Line view*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.lines.controls import CONTROLS
from mha_viz.features.lines.figures import lines

MAIN = """
figures.lines(run, LAYER, heads=[HEAD])
"""  # the page's main figure, from the same run

FEATURE = Feature("lines", "Line view", "Look", 40, ":material/share:",
                  notebook=main_figure("Line view", MAIN),
                  controls=CONTROLS,
                  summary="One layer's heads as lines between the tokens.",
                  figures=(lines,))
