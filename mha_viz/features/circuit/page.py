"""The *Circuit behind a prediction* page: on the pair that *Heads behind a prediction* reads too (the shell's
`pair`), every edge between the model's components estimated (EAP or EAP-IG, `mha_viz.circuits.edges`), the graph
of the top k edges, the faithfulness curve with the chosen k run for real, an edge clicked path-patched for real
beside its estimate, the top 20 edges patched for real against their estimates, and the circuit saved (CSV, JSON)
and opened again (`mha_viz.circuits.path_patching`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz.circuits import edges as circuit_edges
from mha_viz.circuits import need as job_need
from mha_viz.circuits import path_patching
from mha_viz.drawing import circuit as circuit_figures
from mha_viz.drawing import style as figure_style
from mha_viz.features.circuit import controls as circuit_keys
from mha_viz.features.circuit.controls import DEFAULT_DRAWN, LABELS, MAX_DRAWN
from mha_viz.features.circuit.plan import plan_circuit
from mha_viz.ui.kit import charts, jobs, keys, page_controls, plans, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import export_views, notebook_button, pair

TOP_REAL = 20
ABOUT = ("An **edge** runs from a component that writes the residual stream (the embedding, a head, an MLP) to "
         "one that reads it later (a head's query, key or value input, an MLP, the logits). Its **score** "
         "estimates how much m changes when that one reader gets the sender's write from the corrupted run, "
         "everything else clean: (a_sender(corrupted) − a_sender(clean)) · ∂m/∂(reader's input). **EAP** takes "
         "the gradient on the clean run (one backward pass); **EAP-IG** averages it over 5 runs between the two "
         "texts, which is slower and closer to the truth where attention saturates. Negative edges carry what the "
         "clean prediction needs.")


def _results() -> dict:
    return session.setdefault(circuit_keys.CIRC_RESULTS, {})


def _real() -> dict:
    return session.setdefault(circuit_keys.CIRC_REAL, {})


def _keep_only(key) -> None:
    """Results of other pairs go: a session holds one pair's circuits."""
    for store in (_results(), _real()):
        for old in [k for k in store if k[0] != key]:
            store.pop(old)


def circuit_page() -> None:
    cur = pair.start_on_pair("circuit", "This page uses the sidebar's model and text: fix the message above first.")
    if cur is None:
        return
    model = cur.model
    st.caption("How do the heads connect? The clean text is the sidebar's, the corrupted one differs in what "
               "matters, as on *Heads behind a prediction* (the same pair on both pages). " + ABOUT)
    key = pair.pair_inputs(cur)
    auto = page_controls.just_restored(circuit_keys.CIRC_METHOD)  # a link asked for its circuit: found on opening
    if not key.corrupted.strip():
        st.info("Type a corrupted text above, or pick a preset.", icon=":material/edit:")
        _opener(cur, key)
        return
    _keep_only(key)
    _apply_pending(key)
    method = st.radio("Estimate", list(LABELS), format_func=LABELS.get, key=circuit_keys.CIRC_METHOD,
                      persist_state=keys.KEEP, horizontal=True,
                      help="EAP-IG: 5 gradient passes between the corrupted and the clean text (integrated "
                           "gradients). EAP: one, on the clean text.")
    ask = (key, method)
    notebook_button.record(corrupted=key.corrupted, answer=key.answer, wrong=key.wrong, circuit=method)
    if jobs.cancelled(circuit_keys.CIRC_RUNNING) is not None:
        st.warning("Finding the circuit was cancelled; nothing was kept.", icon=":material/stop_circle:")
    _stopped_notice()
    edges = _results().get(ask)
    if edges is None:
        planned, why = plans.kept_plan(circuit_keys.CIRC_PLAN, (key, method), lambda: plan_circuit(
            model, key.clean, key.corrupted, key.answer or None, key.wrong or None, method=method, max_tokens=key.cap))
        if why is not None:  # said before the button, not after the work
            st.warning(why, icon=":material/block:")
            _opener(cur, key)
            return
        buttons = jobs.buttons("Find the circuit", circuit_keys.CIRC_GO, cancel_key=circuit_keys.CIRC_CANCEL,
                               cancel_help="Stop finding the circuit; nothing is kept.",
                               help="Scores every edge, then runs the circuits of the top edges for real for the "
                                    "faithfulness curve.")
        if buttons.pressed or auto:
            if auto:
                buttons.live()
            edges = _find(key, method, planned)
            if edges is None:
                buttons.idle()
            else:
                buttons.done()
    if edges is not None:
        _show(cur, key, ask, edges)
    _opener(cur, key)


def _find(key: pair.Pair, method: str, planned):
    def work(progress):
        return plans.run_admitted(planned, progress=progress)
    edges, error = jobs.run(circuit_keys.CIRC_RUNNING, (key, method), work, first="Scoring every edge…",
                            what="The circuit", out_of_memory="The circuit ran out of memory: use shorter texts or "
                                                              "a smaller model.", time_left=True)
    if error:
        st.error(plain(error), icon=":material/warning:")
        return None
    _results()[(key, method)] = edges
    return edges


def _curve(edges) -> pd.DataFrame:
    return pd.DataFrame(edges.extra.get("curve") or {"k": [], "faithfulness": [], "m": []})


def _stopped() -> set:
    return session.setdefault(circuit_keys.CIRC_STOPPED, set())


def _stopped_notice() -> None:
    """A real run that was cancelled: said once, and not started again by itself (its button offers it)."""
    stopped = jobs.cancelled(circuit_keys.CIRC_REAL_RUNNING)
    if stopped is not None:
        _stopped().add(stopped)
        st.warning("Running it for real was cancelled; nothing was kept.", icon=":material/stop_circle:")


def _run_real(model, key, n: int, what: tuple, compute, again: str | None):
    """A value run for real on the pair (of `n` tokens, its circuit's), kept under (key, what), with a progress bar
    and Cancel; None after a message, or after a Cancel until its button (`again`; None: the caller's button asked)
    asks."""
    store = _real()
    if (key, what) in store:
        return store[(key, what)]
    if again is not None and (key, what) in _stopped() and not st.button(
            again, key=circuit_keys.CIRC_AGAIN_K if what[0] == "k" else circuit_keys.CIRC_AGAIN_EDGE):
        return None
    slot = st.empty()
    jobs.live_button(slot, "Cancel", circuit_keys.CIRC_REAL_CANCEL, live=True,
                     help="Stop running it; nothing is kept.")

    planned = job_need.plan_path_patched(model, n, compute)

    def work(progress):
        return plans.run_admitted(planned, progress=progress)
    value, error = jobs.run(circuit_keys.CIRC_REAL_RUNNING, (key, what), work, first="Running it for real…",
                            what="Path patching", out_of_memory="Path patching ran out of memory: use shorter "
                                                                "texts or a smaller model.", time_left=True)
    slot.empty()
    _stopped().discard((key, what))
    if error:
        st.error(plain(error), icon=":material/warning:")
        return None
    store[(key, what)] = value
    return value


def _show(cur, key, ask, edges) -> None:
    model, method = cur.model, ask[1]
    total = len(edges.scores)
    extra = edges.extra
    a, w = plain(repr(edges.answer_text)), plain(repr(edges.wrong_text))
    st.caption(f"{total:,} edges scored by {method.upper()} on m = logit({a}) − logit({w}): "
               f"{edges.m_clean:+.2f} clean, {edges.m_corrupted:+.2f} corrupted.")
    top_k = min(MAX_DRAWN, total)
    session.settle(circuit_keys.CIRC_K, max(1, min(int(session.get(circuit_keys.CIRC_K, DEFAULT_DRAWN)), top_k)))
    k = int(st.slider("Edges drawn (k, by |score|)", 1, max(top_k, 2), key=circuit_keys.CIRC_K,
                      persist_state=keys.KEEP,
                      help=f"The graph draws the k strongest edges (at most {MAX_DRAWN}); the star on the curve "
                           "below is this circuit run for real."))
    top = edges.top(k)
    notebook_button.record(k=k)
    fig = circuit_figures.graph_figure(top, extra.get("layers", model.num_layers), extra.get("heads", model.num_heads),
                                       extra.get("kv_heads", model.num_kv_heads),
                                       parallel=bool(extra.get("parallel")),
                                       title=f"The top {k} edge{'s' if k != 1 else ''} ({method.upper()}): red "
                                             "where the clean prediction needs it, blue where it works against",
                                       picked=_picked_index(ask, top))
    curve_number = len(fig.data) - 1
    charts.show(fig, key=circuit_keys.CIRC_GRAPH, name="circuit-graph", selection_mode="points",
                on_select=lambda: _on_edge(ask, top, curve_number))
    _picked_edge(model, key, ask, edges)
    mlp = " and MLP (below)" if (edges.scores["input"] == "mlp").any() else ""
    st.caption(f"Layers run left to right: the embedding, each layer's heads (head 0 on top){mlp}, the logits. An "
               "edge ends at its reader's input: just left of a head, its query (upper), key (middle) or value "
               "(lower); with grouped-query attention keys and values go to the KV head (◆). Width: |score|. "
               "Click an edge's dot to path-patch it for real.")
    real_k = _run_real(model, key, edges.tokens, ("k", method, k), lambda progress: path_patching.circuit(
        model, key.clean, key.corrupted, top, edges.answer, edges.wrong, max_tokens=key.cap).faithfulness,
        f"Run the top {k} edges for real")
    curve = _curve(edges)
    charts.show(circuit_figures.curve_figure(curve, total, chosen=k, real=real_k, method=method),
                key=None, name="circuit-faithfulness")
    if real_k is not None:
        st.caption(f"The circuit of the top {k} edges, run for real (only they carry the clean run's writes, every "
                   f"other edge the corrupted run's): faithfulness **{real_k:.3f}** (1: the clean m, 0: the "
                   "corrupted m).")
    _top_real(model, key, ask, edges)
    _downloads(cur, edges, k, real_k, curve)


def _on_edge(ask, top, curve_number: int) -> None:
    picked = charts.clicked(circuit_keys.CIRC_GRAPH, lambda points: circuit_figures.edge_pick(points, curve_number))
    if picked is not None and 0 <= picked < len(top):
        session.put(circuit_keys.CIRC_PICKED, (*ask, str(top["sender"][picked]), str(top["receiver"][picked])))


def _picked(ask) -> tuple[str, str] | None:
    """(sender, receiver) of the edge clicked last on this pair's circuit by this estimate, or None."""
    picked = session.get(circuit_keys.CIRC_PICKED)
    return None if picked is None or tuple(picked[:2]) != tuple(ask) else (picked[2], picked[3])


def _picked_index(ask, top) -> int | None:
    """Where the edge clicked last is among the drawn ones (None: not drawn, or none clicked)."""
    picked = _picked(ask)
    if picked is None:
        return None
    hit = (top["sender"] == picked[0]) & (top["receiver"] == picked[1])
    return int(hit.to_numpy().argmax()) if hit.any() else None


def _picked_edge(model, key, ask, edges) -> None:
    picked = _picked(ask)
    if picked is None:
        return
    sender, receiver = picked
    row = edges.scores[(edges.scores["sender"] == sender) & (edges.scores["receiver"] == receiver)]
    estimate = float(row["score"].iloc[0]) if len(row) else float("nan")
    real = _run_real(model, key, edges.tokens, ("edge", sender, receiver), lambda progress: path_patching.path_patch(
        model, key.clean, key.corrupted, sender, receiver, edges.answer, edges.wrong, max_tokens=key.cap),
        f"Path-patch {sender} → {receiver} for real")
    if real is not None:
        st.info(f"**{sender} → {receiver}**: estimated change in m {estimate:+.4f}; path-patched for real "
                f"**{real:+.4f}** (the clean run with only the input of {receiver} given {sender}'s corrupted write).",
                icon=":material/biotech:")


def _top_real(model, key, ask, edges) -> None:
    what = ("top", ask[1], TOP_REAL)
    done = _real().get((key, what))
    if done is None:
        if not st.button(f"Patch the top {TOP_REAL} edges for real", key=circuit_keys.CIRC_TOP_GO,
                         help=f"Path-patches the {TOP_REAL} strongest edges by |score|, whatever number the graph "
                              "draws (each edge costs a forward of the clean text; they run in batches), and draws "
                              "each one's estimate against its real change."):
            return
        top = edges.top(TOP_REAL)
        done = _run_real(model, key, edges.tokens, what, lambda progress: (top, path_patching.path_patch_many(
            model, key.clean, key.corrupted, top, edges.answer, edges.wrong, max_tokens=key.cap,
            progress=progress)), None)
        if done is None:
            return
    top, real = done
    estimate = top["score"].to_numpy(dtype=float)
    pearson = float(np.corrcoef(estimate, real)[0, 1]) if len(real) > 1 and np.ptp(real) and np.ptp(estimate) \
        else float("nan")
    labels = [f"{s} → {r}" for s, r in zip(top["sender"], top["receiver"])]
    charts.show(circuit_figures.real_scatter(estimate, real, labels, pearson), key=None, name="circuit-estimate-real")


def _downloads(cur, edges, k: int, real_k, curve) -> None:
    stem = figure_style.safe_filename(f"{cur.model.name}-circuit-{edges.method}")
    cols = st.columns(2)
    cols[0].download_button(
        "Download the edges (CSV)", lambda: export_views.table_csv(
            edges.top(len(edges.scores)).rename_axis("rank").reset_index().assign(rank=lambda t: t["rank"] + 1)),
        key=circuit_keys.DL_CIRC_CSV, file_name=f"{stem}.csv", mime="text/csv", on_click="ignore",
        help="A row an edge, strongest first: rank, sender, receiver, input and score.")
    top = edges.top(k)
    nodes = sorted(set(top["sender"]) | {r.split(".")[0] for r in top["receiver"]})
    cols[1].download_button("Download the circuit (JSON)", lambda: edges.to_json(
        k=k, nodes=nodes, faithfulness=real_k, curve=curve.to_dict(orient="list")), key=circuit_keys.DL_CIRC_JSON,
        file_name=f"{stem}.json", mime="application/json", on_click="ignore",
        help="Every edge with its score, the texts, the drawn k and its nodes, and the faithfulness: opens again "
             "on this page.")


def _opener(cur, key) -> None:
    """Open a saved circuit: shown at once when it was found on this pair (once a file), else its pair
    offered. Every file that is not one gets a message."""
    upload = st.file_uploader("Open a saved circuit (JSON)", key=circuit_keys.CIRC_FILE, type=["json"],
                              max_upload_size=64, help="A circuit downloaded from this page.")
    if upload is None:
        return
    try:
        edges = circuit_edges.Edges.from_json(upload.getvalue().decode("utf-8", errors="replace"))
    except ValueError as exc:
        st.error(plain(f"This file cannot be opened: {exc}."), icon=":material/warning:")
        return
    clean, corrupted = edges.extra.get("clean"), edges.extra.get("corrupted")
    if edges.model != cur.model.name:
        st.error(plain(f"This circuit was found on {edges.model}, not on {cur.model.name}: pick that model in the "
                       "sidebar first."), icon=":material/warning:")
    elif not isinstance(clean, str) or not isinstance(corrupted, str):
        st.error("This circuit does not say which texts it was found on.", icon=":material/warning:")
    elif (clean, corrupted) == (key.clean, key.corrupted):
        if session.get(circuit_keys.CIRC_OPENED) != upload.file_id:  # once a file: then it is this pair's circuit
            session.put(circuit_keys.CIRC_OPENED, upload.file_id)
            session.put(circuit_keys.CIRC_PENDING, edges)  # shown from the next run on, its method chosen
            st.rerun()
    else:
        st.warning(plain(f"This circuit was found on another pair: clean “{clean}”, corrupted “{corrupted}”."),
                   icon=":material/alt_route:")
        st.button("Put its pair on the page", key=circuit_keys.CIRC_OPEN_PAIR, on_click=put_pair, args=(edges,),
                  help="Sets the sidebar's text (clean), the corrupted text and the answer and wrong tokens to "
                       "the circuit's, and shows the circuit.")


def put_pair(edges) -> None:
    """The button's callback (before the page's inputs are drawn): the saved circuit's pair in them, the
    circuit waiting for it."""
    pair.put_form(edges.extra.get("clean"), edges.extra.get("corrupted"), edges.answer_text, edges.wrong_text)
    session.put(circuit_keys.CIRC_PENDING, edges)


def _apply_pending(key) -> None:
    """A saved circuit whose pair was just put on the page: shown once the page's pair is its pair."""
    edges = session.get(circuit_keys.CIRC_PENDING)
    if edges is not None and (edges.extra.get("clean"), edges.extra.get("corrupted")) == (key.clean, key.corrupted):
        session.pop(circuit_keys.CIRC_PENDING)
        _results()[(key, edges.method)] = edges
        session.put(circuit_keys.CIRC_METHOD, edges.method)

