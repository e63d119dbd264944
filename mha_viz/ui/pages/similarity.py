"""Page script: head similarity."""
from mha_viz.ui import metric_views

metric_views.similarity_view()
