"""The feature *Head metrics*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.head_metrics.controls import CONTROLS
from mha_viz.features.head_metrics.notebook import cells
from mha_viz.features.head_metrics.type_figures import head_types

FEATURE = Feature("head_metrics", "Head metrics", "Measure", 10, ":material/leaderboard:", notebook=cells, exact=True,
                  controls=CONTROLS,
                  summary="Every head's measures, its type, and heads on two measures.",
                  figures=(head_types,))
