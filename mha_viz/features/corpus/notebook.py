"""Every head's measures over many documents, as notebook cells. The page's notebook recipe
(`mha_viz.view_notebook`): the cells after the model's load and its run, which have `model`, `TEXT`, `CAP`,
`run`, `LAYER` and `HEAD`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, markdown_text, md


def cells(v: NotebookView) -> list[Cell]:
    name = v.option("file")
    where = (md(f"Put the corpus file **{markdown_text(name)}** in the same folder as this notebook (the app read "
                "it as an upload), or change `CORPUS` to its path.") if name else
             md("`CORPUS = \"sample\"`: the bundled sample of documents."))
    return [md("## Corpus\n\nEvery head's measures over many documents (`mha_viz.head_statistics`)."), where, code(f"""
CORPUS = {literal(name or 'sample')}
stats = mha_viz.head_statistics(model, CORPUS, max_tokens=CAP)
stats.table""")]
