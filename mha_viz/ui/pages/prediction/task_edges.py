"""*Heads behind a prediction* over a task, by edges (issue 56): every edge's mean score over the pairs (EAP or
EAP-IG, `mha_viz.edge_attribution` given a `PromptSet`) drawn as the circuit graph of the k strongest means, their
intervals in a table, and on request the circuit's faithfulness over the pairs, each k's mean with its bootstrap
interval drawn as a band (`tasks.faithfulness_set`), as a cancellable job."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_viz import needs
from mha_viz.circuits import edges as circuit_edges
from mha_viz.circuits import path_patching
from mha_viz.features.prediction import circuit_figures
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.prediction import need as prediction_need
from mha_viz.features.prediction.controls import DEFAULT_DRAWN, MAX_DRAWN
from mha_viz.tasks import faithfulness_set
from mha_viz.tasks.prompt_set import PromptSet
from mha_viz.ui.kit import charts, jobs, keys, resources, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button


def _faithfulness(model, task_key, result, prompts: PromptSet, cap: int):
    """The curve over the pairs, kept for this task's edges; computed when its button is pressed."""
    stored = session.get(prediction_keys.TASK_FAITH)
    if stored is not None and stored[0] == task_key:
        return stored[1]
    if jobs.cancelled(prediction_keys.TASK_FAITH_RUNNING) is not None:
        st.warning("The faithfulness run was cancelled; nothing was kept.", icon=":material/stop_circle:")
    total = len(result.table)
    ks = path_patching.curve_sizes(total)
    buttons = jobs.buttons("Faithfulness over the pairs", prediction_keys.TASK_FAITH_GO,
                           cancel_key=prediction_keys.TASK_FAITH_CANCEL,
                           cancel_help="Stops running the circuits; nothing is kept.", primary=False,
                           help=f"Runs the circuits of the top k edges (k = {', '.join(map(str, ks[1:]))}) "
                                "for real on each pair: the mean faithfulness with its interval.")
    if not buttons.pressed:
        return None
    longest = max((p.clean for p in prompts.pairs), key=len)

    def work(progress):
        with resources.slots().hold(need=prediction_need.path_patched(model, needs.tokens(model, longest, cap))):
            return faithfulness_set(model, prompts, result.table, ks, max_tokens=cap,
                                    resamples=result.resamples, seed=result.seed, progress=progress)

    curve, error = jobs.run(prediction_keys.TASK_FAITH_RUNNING, task_key, work,
                            first="Running the circuits on each pair…", what="The faithfulness", time_left=True,
                            out_of_memory="The circuits ran out of memory: use fewer or shorter pairs, or a smaller "
                                          "model.")
    if error:
        buttons.idle()
        st.error(plain(error), icon=":material/warning:")
        return None
    buttons.done()
    session.put(prediction_keys.TASK_FAITH, (task_key, curve))
    return curve


def task_circuit(cur, task_key, result, prompts: PromptSet) -> None:
    """The graph of the strongest mean edges, their intervals, and the faithfulness band once run."""
    model, total = cur.model, len(result.table)
    method = f"{result.method.upper()}" + (f", {result.steps} steps" if result.method == "eap-ig" else "")
    top_k = min(MAX_DRAWN, total)
    session.settle(prediction_keys.TASK_K, max(1, min(int(session.get(prediction_keys.TASK_K, DEFAULT_DRAWN)), top_k)))
    k = int(st.slider("Edges drawn (k, by |mean score|)", 1, max(top_k, 2), key=prediction_keys.TASK_K,
                      persist_state=keys.KEEP))
    top = result.top(k)
    notebook_button.record(task_k=k)
    parallel = any(layer.parallel for layer in circuit_edges.graph(model).layers)
    fig = circuit_figures.graph_figure(top.rename(columns={"mean": "score"}), model.num_layers, model.num_heads,
                                       model.num_kv_heads, parallel=parallel,
                                       title=f"The top {k} edges by their mean over {len(result.kept)} pairs "
                                             f"({method}): red where the clean prediction needs it, blue where it "
                                             "works against", scored=f"(mean over {len(result.kept)} pairs)")
    charts.show(fig, key=prediction_keys.TASK_GRAPH, name="task-circuit")
    holds = (top["low"] <= 0) & (top["high"] >= 0)
    st.dataframe(top.assign(interval_holds_0=holds.to_numpy()).round({"mean": 5, "low": 5, "high": 5}),
                 hide_index=True, key=prediction_keys.TASK_EDGES_DF)
    st.caption(f"{total:,} edges scored on each pair ({result.metric}: "
               + ("each pair's scores as a share of its clean − corrupted gap" if result.metric == "normalised"
                  else "logits") + f"); the mean over the pairs with its {100 * result.level:g} % bootstrap interval "
               f"({result.resamples} resamples, bootstrap seed {result.seed}). An edge's score estimates how m = "
               "logit(answer) − logit(wrong) moves when the edge carries its corrupted write: negative (red) where the "
               f"prediction needs the edge. {int(holds.sum())} of the {k} edges drawn have an interval that holds 0.")
    curve = _faithfulness(model, task_key, result, prompts, resources.token_cap())
    if curve is None:
        return
    charts.show(circuit_figures.band_figure(curve.curve, total, level=curve.level, pairs=len(curve.kept),
                                            method=method), key=None, name="task-faithfulness")
    at = curve.curve[curve.curve["k"] >= k].head(1)
    if len(at):
        row = at.iloc[0]
        st.caption(f"The circuit of the top {int(row['k'])} edges, run for real on each of {len(curve.kept)} pairs: "
                   f"mean faithfulness **{row['mean']:.3f}** [{row['low']:.3f}, {row['high']:.3f}] (1: the clean "
                   "m, 0: the corrupted m; exactly 0 while the circuit's edges do not yet join the embedding to the "
                   "logits, so no clean write reaches the prediction).")
    if not np.isfinite(curve.curve["mean"]).all():
        st.info("Some circuits gave no finite faithfulness.", icon=":material/info:")
