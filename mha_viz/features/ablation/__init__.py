"""The feature *Switch heads off*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.ablation.controls import CONTROLS
from mha_viz.features.ablation.notebook import cells

FEATURE = Feature("ablation", "Switch heads off", "Teach & test", 20, ":material/toggle_off:", notebook=cells,
                  exact=True,
                  controls=CONTROLS,
                  summary="Heads switched off: what the model loses, which heads matter, the pruning curve.")
