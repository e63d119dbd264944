"""The heads behind a prediction: the pair, every head's estimate, attribution and patching, one head in detail, as
notebook cells. The page's notebook recipe (`mha_viz.view_notebook`): the cells after the model's load and its
run, which have `model`, `TEXT`, `CAP`, `run`, `LAYER` and `HEAD`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, md


def cells(v: NotebookView) -> list[Cell]:
    cells = [md("## Heads behind a prediction\n\nA clean text (the run's) and a corrupted one: each head's direct "
                "logit attribution and the share of the gap between the runs its clean output restores.")]
    if v.option("corrupted") is None:
        return cells + [md("The page showed no result: its model is an encoder (no next-token prediction to "
                           "explain) or its heads' outputs cannot be read, or *Find the heads* had not run. With a "
                           "decoder, set a corrupted text and call `prediction.explain(model, TEXT, corrupted)`.")]
    return cells + _prediction_cells(v, v.option("corrupted"))


def _prediction_cells(v: NotebookView, corrupted: str) -> list[Cell]:
    answer, wrong = v.option("answer") or None, v.option("wrong") or None
    patched = "\ne = prediction.patch(model, e, TEXT, CORRUPTED, max_tokens=CAP)  # every head patched for real" \
        if v.option("patched") else ""
    pos_layer = v.option("position_layer")
    return [code(f"""
from mha_viz.interventions import prediction

CORRUPTED = {literal(corrupted)}
ANSWER, WRONG = {literal(answer)}, {literal(wrong)}  # None: the clean run's and the corrupted run's predictions
e = prediction.explain(model, TEXT, CORRUPTED, ANSWER, WRONG, max_tokens=CAP){patched}
print(f"m = logit({{e.answer_text!r}}) - logit({{e.wrong_text!r}}) at the last token: {{e.m_clean:+.2f}} clean, "
      f"{{e.m_corrupted:+.2f}} corrupted")"""),
            code("""
# as the page: the estimate beside real patching (one colour scale) once both exist, then direct logit
# attribution and the scatter of the two; before real patching, direct logit attribution beside the estimate
if e.estimate is not None and e.patching is not None:
    grids = [figures.estimate_grid(e), figures.restored_grid(e), figures.dla_grid(e), figures.estimate_scatter(e)]
else:
    grids = [figures.dla_grid(e)]
    if e.estimate is not None:
        grids.append(figures.estimate_grid(e))
    if e.patching is not None:
        grids.append(figures.restored_grid(e))
for fig in grids:
    fig.show()"""),
            md("### Where each head reads it: the estimate by position"),
            code(f"""
POSITION_LAYER = {literal(pos_layer) if pos_layer is not None else 'len(e.clean.layer_ids) - 1'}  # a row of e.clean
if e.estimate is not None:
    figures.position_grid(e, POSITION_LAYER).show()"""),
            md("### One head: its attention in both runs, what it moves, what it promotes, where it is read"),
            code("""
figures.head(e.clean, LAYER, HEAD, level="tokens").show()
figures.head(e.corrupted, LAYER, HEAD, level="tokens").show()
if e.clean.value_norms is not None:
    figures.head(attribution.as_contributions(e.clean), LAYER, HEAD, level="tokens").show()
promoted, suppressed = attribution.head_tokens(model, TEXT, LAYER, HEAD, k=8, max_tokens=CAP)
figures.head_tokens(promoted, suppressed, LAYER, HEAD).show()
by_position = attribution.patch_positions(model, TEXT, CORRUPTED, LAYER, HEAD, e.dla.target, e.dla.wrong,
                                          max_tokens=CAP)
figures.patched_positions(by_position, e, LAYER, HEAD).show()""")]
