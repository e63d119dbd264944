"""The feature *Head view*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.head_view.controls import CONTROLS
from mha_viz.features.head_view.links_figures import exact_row, link_distances, links_strip
from mha_viz.features.head_view.notebook import cells

FEATURE = Feature("head_view", "Head view", "Look", 20, ":material/zoom_in:", notebook=cells, exact=True,
                  replaces=("whole_text",),
                  controls=CONTROLS,
                  summary="One head's attention at every detail level, its links over the whole text, and *Why here?*.",
                  figures=(links_strip, link_distances, exact_row))
