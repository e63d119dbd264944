"""The feature *Heads behind a prediction*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.prediction.controls import CONTROLS
from mha_viz.features.prediction.notebook import cells

FEATURE = Feature("prediction", "Heads behind a prediction", "Measure", 70, ":material/target:", notebook=cells,
                  exact=True,
                  controls=CONTROLS,
                  summary=("Which heads make a prediction: attribution, patching, the estimate and circuits over a "
                          "pair or a task."))
