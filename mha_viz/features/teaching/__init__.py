"""The feature *Teaching*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.features.teaching.controls import CONTROLS
from mha_viz.features.teaching.figures import kv_sharing, probability_maps, softmax_row, walkthrough
from mha_viz.features.teaching.notebook import cells

FEATURE = Feature("teaching", "Teaching: step by step", "Teach & test", 10, ":material/school:",
                  heading="Teaching: attention step by step", notebook=cells, exact=True,
                  controls=CONTROLS,
                  summary=("One head's computation step by step, with the model's own numbers, over a window anywhere "
                           "in the text."),
                  figures=(walkthrough, softmax_row, kv_sharing, probability_maps))
