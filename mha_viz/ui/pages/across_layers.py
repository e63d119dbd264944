"""Page script: across layers."""
from mha_viz.ui import metric_views

metric_views.layers_view()
