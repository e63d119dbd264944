"""The feature *Heads behind a task*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.task.controls import CONTROLS
from mha_viz.features.task.figures import task_grid
from mha_viz.features.task.notebook import cells

FEATURE = Feature("task", "Heads behind a task", "Measure", 72, ":material/dataset:", notebook=cells,
                  controls=CONTROLS,
                  summary=("Which heads carry a prediction over a set of pairs (IOI, greater-than, induction, "
                           "docstring or a file): each head's mean with its interval, or the circuit of the "
                           "strongest mean edges with its faithfulness."),
                  figures=(task_grid,))
