"""Heads switched off: the loss and predictions with them off, which heads matter, the pruning curve, as notebook
cells. The page's notebook recipe (`mha_viz.view_notebook`): the cells after the model's load and its run, which
have `model`, `TEXT`, `CAP`, `run`, `LAYER` and `HEAD`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, md


def cells(v: NotebookView) -> list[Cell]:
    keep = v.option("keep")
    cells = [md("## Switch heads off\n\nHeads switched off have their output z multiplied by ξ = 0 before W_O "
                "(or replaced by their mean output on this text)."),
             code(f"""
import numpy as np
from mha_viz.interventions import ablation, ablation_outcome
from mha_viz.text import loss_inputs

KEEP = np.array({literal(keep) if keep is not None else 'np.ones((model.num_layers, model.num_heads)).tolist()'},
                dtype=bool)  # True: the head is on (layers × heads)
MEAN_ABLATION = {literal(bool(v.option('mean_ablation', False)))}
kind = loss_inputs.loss_kind(model)
print(f"{{int((~KEEP).sum())}} of {{KEEP.size}} heads off; measured: {{loss_inputs.LOSS_LABELS[kind]}}")""")]
    if v.option("kind") == "embedding":
        cells.append(code(f"""
OTHER = {literal(v.option('other', ''))}  # a second sentence to compare with
pairs = [(ablation_outcome.unablated(model, t, max_tokens=CAP).embedding,
          ablation_outcome.ablated(model, t, KEEP, mean_ablation=MEAN_ABLATION, max_tokens=CAP).embedding)
         for t in [TEXT] + ([OTHER] if OTHER.strip() else [])]
ablation_outcome.compare_embeddings(*pairs)"""))
    else:
        cells.append(code("""
base = ablation_outcome.unablated(model, TEXT, max_tokens=CAP)
off = base if KEEP.all() else ablation_outcome.ablated(model, TEXT, KEEP, mean_ablation=MEAN_ABLATION, base=base,
                                                      max_tokens=CAP)
print(f"loss {off.loss:.4f} ({off.loss - base.loss:+.4f} with the heads off)")
for p in ablation_outcome.prediction_pairs(base, off):
    print(f"Top 5, {p.position}:")
    print(pd.DataFrame({"every head on": [f"{t}  ({q:.1%})" for t, q in p.before],
                        "with the heads off": [f"{t}  ({q:.1%})" for t, q in p.after]}).to_string(index=False))"""))
    scored = v.option("importance")
    if scored is None:
        return cells
    source = "TEXT" if scored == "this text" else "ablation.SAMPLE_PARAGRAPH"
    cells += [md("### Which heads matter"), code(f"""
SCORED = {source}
imp = ablation.head_importance(model, SCORED, max_tokens=CAP)
figures.grid(imp, title="Head importance (per-layer L2-normalised)")""")]
    if v.option("pruning"):
        cells.append(code("""
fractions = ablation.PRUNE_FRACTIONS
orders = [np.argsort(imp.ravel())] + [np.random.default_rng(seed).permutation(imp.size) for seed in range(5)]
curves = ablation.pruning_curves(model, SCORED, orders, fractions, mean_ablation=MEAN_ABLATION, max_tokens=CAP)
curve = pd.DataFrame({"fraction of heads off": fractions, "importance order": curves[0],
                      "random mean": curves[1:].mean(0), "random sd": curves[1:].std(0)})
figures.pruning_curve(curve, loss_label=loss_inputs.LOSS_LABELS[kind].split(" (")[0])"""))
    return cells
