"""The *Heads behind a task* page (issue 56): instead of one pair, a set of prompt pairs (`mha_viz.tasks`): a
generator of the standard tasks with its size and seed, or the user's CSV or JSONL file. One method runs over the
set (attribution patching, activation patching, direct logit attribution, or edge attribution) as a cancellable job,
and the grid shows each head's mean over the pairs, its bootstrap interval and p-value on hover, and a cross on the
heads whose interval holds 0; by edges, the circuit of the strongest mean edges and its faithfulness over the pairs.
The choices are page controls (`page_controls`): links, lessons and the notebook carry the generator, its size and
seed and the method (a file's pairs are the user's: the notebook names the file)."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz.circuits import edges as circuit_edges
from mha_viz.circuits import need as job_need
from mha_viz.circuits import path_patching
from mha_viz.drawing import circuit as circuit_figures
from mha_viz.features.task import controls as task_keys
from mha_viz.features.task import figures as task_figures
from mha_viz.features.task.controls import (
    ABOUT,
    DEFAULT_DRAWN,
    DEFAULTS,
    EDGE_METHODS,
    MAX_DRAWN,
    MAX_PAIRS,
    METHODS,
    SOURCES,
)
from mha_viz.features.task.plan import RESAMPLES, plan_task
from mha_viz.tasks import faithfulness_set, generators
from mha_viz.tasks.prompt_set import PromptSet
from mha_viz.text.tokenize import InputError
from mha_viz.ui.kit import charts, jobs, keys, plans, resources, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import export_views, notebook_button, pair, view_helpers

# --- by edges: every edge's mean score over the pairs (EAP or EAP-IG, `mha_viz.edge_attribution` given a
# `PromptSet`) drawn as the circuit graph of the k strongest means, their intervals in a table, and on request the
# circuit's faithfulness over the pairs, each k's mean with its bootstrap interval drawn as a band
# (`tasks.faithfulness_set`), as a cancellable job.

def _faithfulness(model, task_key, result, prompts: PromptSet, cap: int):
    """The curve over the pairs, kept for this task's edges; computed when its button is pressed."""
    stored = session.get(task_keys.TASK_FAITH)
    if stored is not None and stored[0] == task_key:
        return stored[1]
    if jobs.cancelled(task_keys.TASK_FAITH_RUNNING) is not None:
        st.warning("The faithfulness run was cancelled; nothing was kept.", icon=":material/stop_circle:")
    total = len(result.table)
    ks = path_patching.curve_sizes(total)
    buttons = jobs.buttons("Faithfulness over the pairs", task_keys.TASK_FAITH_GO,
                           cancel_key=task_keys.TASK_FAITH_CANCEL,
                           cancel_help="Stops running the circuits; nothing is kept.", primary=False,
                           help=f"Runs the circuits of the top k edges (k = {', '.join(map(str, ks[1:]))}) "
                                "for real on each pair: the mean faithfulness with its interval.")
    if not buttons.pressed:
        return None
    planned, why = _planned(model, task_key, prompts)  # the task's plan, made again if another replaced it
    if why is not None:
        buttons.idle()
        st.warning(why, icon=":material/block:")
        return None
    n = planned.n  # the longest pair's tokens, read by the task's plan

    faithful = job_need.plan_path_patched(model, n, lambda progress: faithfulness_set(
        model, prompts, result.table, ks, max_tokens=cap, resamples=result.resamples, seed=result.seed,
        progress=progress))

    def work(progress):
        return plans.run_admitted(faithful, progress=progress)

    curve, error = jobs.run(task_keys.TASK_FAITH_RUNNING, task_key, work,
                            first="Running the circuits on each pair…", what="The faithfulness", time_left=True,
                            out_of_memory="The circuits ran out of memory: use fewer or shorter pairs, or a smaller "
                                          "model.")
    if error:
        buttons.idle()
        st.error(plain(error), icon=":material/warning:")
        return None
    buttons.done()
    session.put(task_keys.TASK_FAITH, (task_key, curve))
    return curve


def task_circuit(cur, task_key, result, prompts: PromptSet) -> None:
    """The graph of the strongest mean edges, their intervals, and the faithfulness band once run."""
    model, total = cur.model, len(result.table)
    method = f"{result.method.upper()}" + (f", {result.steps} steps" if result.method == "eap-ig" else "")
    top_k = min(MAX_DRAWN, total)
    session.settle(task_keys.TASK_K, max(1, min(int(session.get(task_keys.TASK_K, DEFAULT_DRAWN)), top_k)))
    k = int(st.slider("Edges drawn (k, by |mean score|)", 1, max(top_k, 2), key=task_keys.TASK_K,
                      persist_state=keys.KEEP))
    top = result.top(k)
    notebook_button.record(task_k=k)
    parallel = any(layer.parallel for layer in circuit_edges.graph(model).layers)
    fig = circuit_figures.graph_figure(top.rename(columns={"mean": "score"}), model.num_layers, model.num_heads,
                                       model.num_kv_heads, parallel=parallel,
                                       title=f"The top {k} edges by their mean over {len(result.kept)} pairs "
                                             f"({method}): red where the clean prediction needs it, blue where it "
                                             "works against", scored=f"(mean over {len(result.kept)} pairs)")
    charts.show(fig, key=task_keys.TASK_GRAPH, name="task-circuit")
    holds = (top["low"] <= 0) & (top["high"] >= 0)
    st.dataframe(top.assign(interval_holds_0=holds.to_numpy()).round({"mean": 5, "low": 5, "high": 5}),
                 hide_index=True, key=task_keys.TASK_EDGES_DF)
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



class TaskKey(NamedTuple):
    """What a result over a task was computed from."""

    model: object
    source: str  # a generator's call, or the file's name and a digest of its contents
    method: str
    cap: int


RAN = "Ran over these pairs with this method: change the task, the method or the pairs to run again."


def _prompts(tokenizer) -> tuple[PromptSet | None, dict]:
    """The set the controls describe (None, after a message, when there is none yet) and what a notebook needs
    to make it again; a generator's for the model whose tokenizer is `tokenizer` (`generators.make`)."""
    source = SOURCES[st.selectbox("Pairs", list(SOURCES), key=task_keys.TASK_SOURCE, persist_state=keys.KEEP)]
    if source == "file":
        upload = st.file_uploader("Prompt pairs (columns clean, corrupted, answer, wrong)", type=["csv", "jsonl"],
                                  key=task_keys.TASK_FILE)
        if upload is None:
            st.info("Upload a CSV (a header row clean, corrupted, answer, wrong) or a JSONL file (one object a "
                    "line with those keys).", icon=":material/upload_file:")
            return None, {}
        try:
            prompts = PromptSet.from_file(upload.name, upload.getvalue().decode("utf-8"))
        except (InputError, UnicodeDecodeError) as exc:
            st.error(plain(f"{upload.name}: {exc}"), icon=":material/warning:")
            return None, {}
        return prompts, {"task_file": upload.name}
    for name, value in DEFAULTS.items():
        session.setdefault(name, value)
    cols = st.columns(2)
    size = int(cols[0].number_input("Pairs in the set", 2, MAX_PAIRS, key=task_keys.TASK_SIZE,
                                    persist_state=keys.KEEP))
    seed = int(cols[1].number_input("Seed", 0, 2**31 - 1, key=task_keys.TASK_SEED, persist_state=keys.KEEP))
    st.caption(plain(ABOUT[source]) + " The same seed gives the same pairs.")
    return generators.make(source, size, seed=seed, tokenizer=tokenizer), {"task_source": source, "task_size": size,
                                                                           "task_seed": seed}


def _planned(model, key: TaskKey, prompts: PromptSet):
    """(the task's plan, None), or (None, why the method cannot run on these pairs): `plan_task`, planned once a task
    key (a rerun repeats nothing); its jobs run that plan."""
    return plans.kept_plan(task_keys.TASK_CHECKED, key, lambda: plan_task(model, prompts, key.method, key.cap))


def _compute(key: TaskKey, planned):
    """The result of `key` as planned, with a progress bar and Cancel, admitted on its plan's need."""

    def budgeted(progress):
        return plans.run_admitted(planned, progress=progress)
    result, error = jobs.run(task_keys.TASK_RUNNING, key, budgeted, first="Running over the pairs…",
                             what="The task", out_of_memory="The task ran out of memory: use fewer or shorter "
                                                            "pairs, or a smaller model.", time_left=True)
    if error:
        st.error(plain(error), icon=":material/warning:")
        return None
    session.put(task_keys.TASK_RESULT, (key, result))
    return result


def table(result, layer_ids: list[int]) -> pd.DataFrame:
    """A row a head: the mean over the pairs, its interval, the p-value and whether the interval holds 0."""
    layers, heads = np.meshgrid(np.asarray(layer_ids), np.arange(result.mean.shape[1]), indexing="ij")
    return pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(), "mean": result.mean.ravel(),
                         "low": result.low.ravel(), "high": result.high.ravel(), "p_value": result.p_value.ravel(),
                         "interval_holds_0": result.crosses_zero.ravel()})


def task_page() -> None:
    cur = pair.start_on_pair("task", "This page uses the sidebar's model: fix the message above first.")
    if cur is None:
        return
    model = cur.model
    st.caption("Which heads carry a prediction across a task? Each pair is a clean prompt, a corrupted one that "
               "differs in what matters, and an answer and a wrong token; the sidebar's text is not used here. "
               "The method runs on every pair, then each head's mean over the pairs with its uncertainty.")
    prompts, made = _prompts(model.tokenizer)
    method = METHODS[st.selectbox("Method", list(METHODS), key=task_keys.TASK_METHOD, persist_state=keys.KEEP)]
    notebook_button.record(task_method=method, **made)
    if prompts is None:
        return
    digest = prompts.source if "task_file" not in made else \
        f"{prompts.source} ({hashlib.sha1(repr(prompts.pairs).encode()).hexdigest()[:12]})"
    key = TaskKey(cur.model_key, digest, method, resources.token_cap())
    if jobs.cancelled(task_keys.TASK_RUNNING) is not None:
        st.warning("The task was cancelled; nothing was kept.", icon=":material/stop_circle:")
    stored = session.get(task_keys.TASK_RESULT)
    result = stored[1] if stored is not None and stored[0] == key else None
    if result is not None:
        jobs.finished(st, "Run over the task", RAN)
    else:
        planned, why = _planned(model, key, prompts)
        if why is not None:  # said before the button, not after the work
            st.warning(why, icon=":material/block:")
            return
        buttons = jobs.buttons("Run over the task", task_keys.TASK_GO, cancel_key=task_keys.TASK_CANCEL,
                               cancel_help="Stops the run over the pairs; nothing is kept.", ran=RAN,
                               help=f"Runs the method on each of the {len(prompts)} pairs, then the mean over them "
                                    f"with its {RESAMPLES}-resample bootstrap interval and a sign-flip p-value.")
        if not buttons.pressed:
            return
        result = _compute(key, planned)
        if result is None:
            buttons.idle()
            return
        buttons.done()
    _said(result)
    if key.method in EDGE_METHODS:
        return task_circuit(cur, key, result, prompts)
    _results(cur, result)


FEW_PAIRS = 10  # below it, the interval and the p-value say little


def _said(result) -> None:
    left = "; ".join(f"{count} {why}" for why, count in result.left_out.items())
    st.success(f"{len(result.kept)} pairs of {plain(result.source)} ran" + (f" ({plain(left)}: left out)." if left
                                                                           else "."), icon=":material/target:")
    pairs = len(result.kept)
    if pairs < FEW_PAIRS:
        st.warning(f"Only {pairs} pairs: a bootstrap of so few values gives intervals too narrow to trust, and the "
                   f"sign-flip p-value cannot fall below 2 / 2^{pairs} = {2 / 2 ** pairs:.3g}. Use {2 * FEW_PAIRS} "
                   "pairs or more for a mean you can report.", icon=":material/info:")


def _results(cur, result) -> None:
    layer_ids = cur.model.layer_ids
    charts.show(task_figures.task_grid(result, layer_ids=layer_ids), key=task_keys.TASK_GRID,
                selection_mode="points",
                on_select=lambda: view_helpers.open_clicked_head(task_keys.TASK_GRID, view_helpers.grid_index))
    crossing = int(result.crosses_zero.sum())
    st.caption(f"Each cell: a head's mean over the pairs; hover for its {100 * result.level:g} % bootstrap interval "
               f"({result.resamples} resamples, bootstrap seed {result.seed}) and the sign-flip p-value of a mean ≠ 0. "
               f"A cross marks the {crossing} heads whose interval holds 0: their effect is not told apart from none. "
               "Click a cell to open that head.")
    st.download_button("Download the task's grid (CSV)", lambda: export_views.table_csv(table(result, layer_ids)),
                       key=task_keys.DL_TASK, file_name="task-heads.csv", mime="text/csv", on_click="ignore")
