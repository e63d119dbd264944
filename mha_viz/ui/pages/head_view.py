"""Page script: head_view."""
from mha_viz.ui import views

views.head_view()
