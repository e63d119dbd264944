"""The feature *Queries and keys*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.qk.controls import CONTROLS

MAIN = """
t = mha_viz.circuits.qk_terms(model, TEXT, run.layer_ids[LAYER], HEAD, run.n - 1, 0, max_tokens=CAP)
t.score, t.error
"""  # the page's main figure, from the same run

FEATURE = Feature("qk", "Queries and keys", "Teach & test", 30, ":material/scatter_plot:",
                  notebook=main_figure("Queries and keys", MAIN),
                  controls=CONTROLS,
                  summary="The queries and keys as points, and one score split into its terms.")
