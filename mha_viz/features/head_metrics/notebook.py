"""Every head's measures, its type and the scatter of two measures, as notebook cells. The page's notebook recipe
(`mha_viz.view_notebook`): the cells after the model's load and its run, which have `model`, `TEXT`, `CAP`,
`run`, `LAYER` and `HEAD`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, md


def cells(v: NotebookView) -> list[Cell]:
    metric = v.option("metric", "entropy")
    copying = ("\nif weights is not None:  # the copying measure: each head's copying score (a decoder's unembedding)"
               "\n    weights = {**weights, \"copying\": torch.as_tensor(mha_viz.circuits.copying_scores(model))}"
               if metric == "copying" else "")
    imports = "import torch\n\n" if copying else ""
    return [
        md("## Head metrics\n\nEvery head's measures (`mha_viz.head_table`), one as a layers × heads grid."),
        code(f"""
{imports}weights = model.head_weights() if model.has_head_outputs else None  # for the output-norm measures{copying}
table = mha_viz.head_table(run, weights)
METRIC = {literal(metric)}
figures.metric_grid(run, METRIC, table=table)"""),
        md("Every head's type (its pattern class), and the table."),
        code("figures.head_types(run, table=table)"),
        md("Every head on two measures, coloured by a third (`\"layer\"`, `\"pattern\"` or a measure)."),
        code(f"figures.head_scatter(table, {literal(v.option('scatter_x', 'entropy'))}, "
             f"{literal(v.option('scatter_y', 'prev_token_score'))}, {literal(v.option('scatter_colour', 'layer'))})"),
        code("table"),
    ] + ([md("## Where the answer looks\n\nEach head's share of the attention from the assistant's tokens to the "
             "system's words, the user's, the assistant's and the chat template's own tokens "
             "(`mha_viz.metrics.role_mass`)."),
          code("roles = mha_viz.metrics.role_mass(run, chat)\nfigures.role_map(roles)"),
          code('roles.sort_values("system", ascending=False, kind="stable")')] if v.chat is not None else [])
