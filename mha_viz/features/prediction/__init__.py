"""The feature *Heads behind a prediction*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.prediction.controls import CONTROLS
from mha_viz.features.prediction.explanation_figures import (
    dla_grid,
    estimate_grid,
    estimate_scatter,
    head_tokens,
    patched_positions,
    position_grid,
    restored_grid,
)
from mha_viz.features.prediction.notebook import cells

FEATURE = Feature("prediction", "Heads behind a prediction", "Measure", 70, ":material/target:", notebook=cells,
                  exact=True,
                  controls=CONTROLS,
                  summary=("Which heads make a prediction on a pair of texts: direct logit attribution, the "
                           "estimate of patching and patching for real, one head opened."),
                  figures=(dla_grid, estimate_grid, restored_grid, estimate_scatter, position_grid, head_tokens,
                           patched_positions))
