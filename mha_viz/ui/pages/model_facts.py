"""Page script: facts_view."""
from mha_viz.ui import views

views.facts_view()
