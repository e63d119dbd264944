"""Retrieval heads as notebook cells: the page's scores and the head's look at the needle, with the page's length,
depths, needle and question (`mha_viz.view_notebook`: the cells after the model's load and its run, which have
`model`, `LAYER` and `HEAD`)."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, md
from mha_viz.features.retrieval.controls import DEFAULT_DEPTHS, DEFAULT_LENGTH


def cells(v: NotebookView) -> list[Cell]:
    length = int(v.option("length", DEFAULT_LENGTH))
    depths = tuple(float(d) / 100 for d in v.option("depths", DEFAULT_DEPTHS))
    needle = v.option("needle")
    needles = "" if needle is None else f", needles=[({literal(str(needle[0]))}, {literal(str(needle[1]))})]"
    return [md("## Retrieval heads\n\nA needle sentence planted in the bundled documents at each depth, a question "
               "after it; the model answers greedily, and a head scores each needle token it copied while its heaviest "
               "key was that token in the needle (Wu et al. 2024)."),
            code(f"found = mha_viz.tasks.find_retrieval(model, lengths=({length},), depths={literal(depths)}"
                 f"{needles})\nfigures.retrieval_grid(found, layer_ids=model.layer_ids)"),
            code("figures.needle_look(found, LAYER, HEAD) if found.look is not None else "
                 "'the model copied no needle token in the last trial'")]
