"""Page script: ablation."""
from mha_viz.ui import teach_views

teach_views.ablation_view()
