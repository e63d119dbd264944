"""The feature *Circuit behind a prediction*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.circuit.controls import CONTROLS
from mha_viz.features.circuit.notebook import cells

FEATURE = Feature("circuit", "Circuit behind a prediction", "Measure", 71, ":material/schema:", notebook=cells,
                  controls=CONTROLS,
                  summary=("How the heads connect for a prediction: every edge estimated (EAP, EAP-IG) on the "
                           "prediction's pair, the top edges drawn, run and path-patched for real, saved and "
                           "opened again."))
