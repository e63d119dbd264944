"""Page script: teaching."""
from mha_viz.ui import teach_views

teach_views.teaching_view()
