"""Page script: head metrics."""
from mha_viz.ui import metric_views

metric_views.metrics_view()
