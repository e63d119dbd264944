"""The feature *Switch heads off*, registered: heads switched off: what the model loses, which heads matter, the
pruning curve. Its page is `mha_viz/ui/pages/ablation/__init__.py`."""

from mha_viz.catalogue import Feature
from mha_viz.features.ablation.controls import CONTROLS
from mha_viz.features.ablation.notebook import cells

FEATURE = Feature("ablation", "Switch heads off", "Teach & test", 20, ":material/toggle_off:", notebook=cells,
                  exact=True,
                  controls=CONTROLS)
