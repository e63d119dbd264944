"""Every head at once, and what the sidebar's lens and hidden tokens change, as notebook cells. The page's notebook
recipe (`mha_viz.view_notebook`): the cells after the model's load and its run, which have `model`, `TEXT`,
`CAP`, `run`, `LAYER` and `HEAD`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, md


def cells(v: NotebookView) -> list[Cell]:
    return [
        md("## Model view\n\nEvery head at once: rows are layers, columns heads; each thumbnail is one head's "
           "attention (queries down, keys across)."),
        code(f"figures.model_grid(run, rescale={literal(bool(v.option('rescale', True)))})"),
        code("""
if run.lens and weights_run is not run:  # contributions: how much they change each head's picture
    js = attribution.lens_divergence(weights_run, run)
    figures.grid(js, title="JS divergence (base 2) between weights and contributions, mean over queries",
                 layer_ids=run.layer_ids).show()
if run.hidden is not None:  # tokens hidden: how much attention each head gave them
    figures.grid(run.hidden.mass, title="Attention to the hidden tokens, every head",
                 layer_ids=run.layer_ids).show()"""),
    ]
