"""A circuit behind a prediction as notebook cells: the pair, every edge's estimate, the graph of the top k edges and
that circuit run for real. The page's notebook recipe (`mha_viz.view_notebook`): the cells after the model's load and
its run, which have `model`, `TEXT` and `CAP`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, md

DEFAULT_K = 30


def cells(v: NotebookView) -> list[Cell]:
    head = [md("## Circuit behind a prediction\n\nEvery edge from a component that writes the residual stream to one "
               "that reads it later, scored by how much m = logit(answer) − logit(wrong) moves when that one edge "
               "carries the corrupted run's write; the top k edges drawn, then run for real (faithfulness: 1 is the "
               "clean m, 0 the corrupted one).")]
    corrupted = v.option("corrupted")
    if not corrupted:
        return head + [md("The page had no corrupted text (or its model is an encoder, whose heads make no "
                          "next-token prediction). With a decoder, set one and call "
                          "`mha_viz.edge_attribution(model, TEXT, corrupted)`.")]
    method = v.option("circuit") or "eap-ig"
    answer, wrong = v.option("answer") or None, v.option("wrong") or None
    return head + [code(f"""
from mha_viz.drawing import circuit as circuit_figures

CORRUPTED = {literal(corrupted)}
ANSWER, WRONG = {literal(answer)}, {literal(wrong)}  # None: the clean run's and the corrupted run's predictions
edges = mha_viz.edge_attribution(model, TEXT, CORRUPTED, ANSWER, WRONG, method={literal(method)}, max_tokens=CAP)
print(f"{{len(edges.scores):,}} edges; m = {{edges.m_clean:+.2f}} clean, {{edges.m_corrupted:+.2f}} corrupted")
K = {literal(int(v.option("k") or DEFAULT_K))}  # the edges drawn and run, strongest |score| first
top = edges.top(K)
circuit_figures.graph_figure(top, model.num_layers, model.num_heads, model.num_kv_heads,
                             title=f"The top {{K}} edges").show()
real = mha_viz.circuit(model, TEXT, CORRUPTED, top, edges.answer, edges.wrong, max_tokens=CAP)
print(f"faithfulness of the top {{K}} edges, run for real: {{real.faithfulness:.3f}}")
top""")]
