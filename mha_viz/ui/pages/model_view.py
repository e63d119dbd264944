"""Page script: model_view."""
from mha_viz.ui import views

views.model_view()
