"""Page script: compare heads."""
from mha_viz.ui import metric_views

metric_views.compare_view()
