"""The feature *Generate*, registered (its `summary` says what its page shows).
Its page is `page.py`, beside it."""

from mha_viz.catalogue import Feature
from mha_viz.export.notebook_view import main_figure
from mha_viz.features.generate.controls import CONTROLS
from mha_viz.features.generate.figures import generation_step

MAIN = """
gen = mha_viz.generate(model, TEXT, max_new_tokens=32)
figures.generation_step(gen, -1, layer=LAYER, head=HEAD)
"""  # the page's main figure, from the same run

FEATURE = Feature("generate", "Generate", "Look", 70, ":material/edit_note:",
                  notebook=main_figure("Generate", MAIN),
                  controls=CONTROLS,
                  summary="A decoder's text grown token by token, with every step's attention.",
                  figures=(generation_step,))
