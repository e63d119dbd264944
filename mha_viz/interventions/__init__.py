"""The model intervened on: heads switched off (`ablation`, `ablation_outcome`; their loss, computed once for every
caller: `heads_off_loss`), what heads write (`attribution`), activation patching and its estimate (`patching`,
`estimate`), heads behind a prediction (`prediction`).
"""

from mha_viz.interventions.attribution import direct_logit, value_weighted
from mha_viz.interventions.estimate import estimate_heads, estimate_positions

__all__ = ["direct_logit", "estimate_heads", "estimate_positions", "value_weighted"]
