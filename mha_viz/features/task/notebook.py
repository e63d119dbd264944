"""Heads behind a task as notebook cells: the same set (a generator with its size and seed, or the user's file), the
same method over it, and the grid of each head's mean with its interval, or by edges the circuit of the strongest
mean edges and its faithfulness over the pairs. The page's notebook recipe (`mha_viz.view_notebook`): the cells
after the model's load and its run, which have `model` and `CAP`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, md

METHODS = {"estimate": "mha_viz.estimate_heads", "patch": "mha_viz.patch_heads", "dla": "mha_viz.direct_logit"}


def cells(v: NotebookView) -> list[Cell]:
    """The page over a task: the same set (a generator with its size and seed, or the user's file), the same method
    over it, and the grid of each head's mean with its interval."""
    name = v.option("task_file")
    if name:
        make = (f"prompts = PromptSet.from_file({literal(name)})  # put the file beside this notebook, or change "
                "the path")
    else:
        make = (f"prompts = generators.make({literal(str(v.option('task_source', 'ioi')))}, "
                f"{literal(int(v.option('task_size', 20)))}, seed={literal(int(v.option('task_seed', 0)))}, "
                "tokenizer=model.tokenizer)  # greater-than in the digits a token of the model holds")
    method = v.option("task_method")
    if method in ("eap", "eap-ig"):
        run = f"""result = mha_viz.edge_attribution(model, prompts, method={literal(method)}, steps=5, max_tokens=CAP,
                                 resamples=1000)
print(f"{{len(result.kept)}} pairs of {{result.source}} ran; left out: {{dict(result.left_out) or 'none'}}")
result.top({literal(int(v.option("task_k", 30)))})  # the strongest mean edges, with their intervals"""
        return [md("## Heads behind a task: its circuit\n\nEvery edge's mean score over the "
                   "pairs with its bootstrap interval, then the faithfulness of the circuit of the top k edges on "
                   "each pair, its mean with a band."),
                code(f"from mha_viz.tasks import PromptSet, faithfulness_set, generators\n\n{make}\n{run}"),
                code("""
sizes = mha_viz.circuits.curve_sizes(len(result.table))  # the page's k: 0, then shares of the edges
curve = faithfulness_set(model, prompts, result.table, sizes, max_tokens=CAP)
curve.curve  # k, the mean faithfulness over the pairs, and its interval (low, high)""")]
    call = METHODS.get(method, METHODS["estimate"])
    return [md("## Heads behind a task\n\nOne method over a set of prompt pairs: each head's "
               "mean over the pairs, its bootstrap interval and the sign-flip p-value (a cross where the interval "
               "holds 0)."),
            code(f"""
from mha_viz.tasks import PromptSet, generators

{make}
result = {call}(model, prompts, max_tokens=CAP, resamples=1000)
print(f"{{len(result.kept)}} pairs of {{result.source}} ran; left out: {{dict(result.left_out) or 'none'}}")
figures.task_grid(result, layer_ids=model.layer_ids)""")]
