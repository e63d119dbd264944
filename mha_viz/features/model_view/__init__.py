"""The feature *Model view*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.model_view.controls import CONTROLS
from mha_viz.features.model_view.notebook import cells

FEATURE = Feature("model_view", "Model view", "Look", 10, ":material/grid_view:", notebook=cells, exact=True,
                  controls=CONTROLS,
                  summary="Every head at once: a layers × heads grid of thumbnails, a hybrid's other layers beside it.")
