"""The views: model view (all heads), head view (one head) and model facts.

Each view reads the run the sidebar computed (`state.current()`) and only draws.
"""

from __future__ import annotations

import logging

import numpy as np
import streamlit as st

import mha_viz
from mha_viz import detail
from mha_viz.figures import heads as head_figures
from mha_viz.figures import metrics as metric_figures
from mha_viz.figures import style as figure_style
from mha_viz.ui import analysis, charts, export_views, keys, seq2seq_views, session, state, subset_views

log = logging.getLogger("mha_viz.ui")


def _clamp_selection(run) -> None:
    """Keep the chosen layer and head valid when the model changes."""
    # Plain keys, not widget keys: Streamlit drops a widget's state on pages that do not draw it.
    session.put(keys.SEL_LAYER, min(int(session.get(keys.SEL_LAYER, 0)), run.num_layers - 1))
    session.put(keys.SEL_HEAD, min(int(session.get(keys.SEL_HEAD, 0)), run.num_heads - 1))


def open_head(layer: int, head: int) -> None:
    """Choose a head and open it in the head view (at the start of the next run)."""
    session.put_all((keys.SEL_LAYER, keys.SEL_HEAD), (layer, head))
    session.put(keys.GOTO, "head_view")


def examples_link(cur, row: int, head: int, where=None) -> None:
    """A button to this head's examples across the corpus (the Head examples page), once a corpus
    with examples has been run for the sidebar's model in this session."""
    last = session.get(keys.CORPUS_LAST)  # every corpus job of the page keeps the examples
    if last is None or last.model != cur.model_key or cur.run is None:
        return
    layer = cur.run.layer_ids[row]
    if (where or st).button(f"Layer {layer}, head {head} across the corpus", key=keys.EXAMPLES_OPEN,
                            help="Its top documents, samples from every score decile and its histograms, from the "
                                 "corpus run on the Corpus page."):
        # the examples' rows are the model's attention layers (a hybrid's softmax layers)
        session.put(keys.EXAMPLES_LAYER, cur.model.layer_ids.index(layer) if cur.model else row)
        session.put(keys.EXAMPLES_HEAD, head)
        session.put(keys.GOTO, "examples")
        st.rerun()


def clicked_head(widget_key: str) -> tuple[int, int] | None:
    """(layer row, head) that a click on a layers × heads grid (`head_figures.grid_pick` layout) of the
    current run selected, read from the chart's selection event; None when there is none or it
    cannot be read (logged, never a traceback)."""
    try:
        event = session.get(widget_key) or {}
        points = (event.get("selection") or {}).get("points") or []
        run = state.current().run
        picked = head_figures.grid_pick(points, run.num_heads) if run is not None else None
        return picked if picked is not None and picked[0] < run.num_layers else None
    except Exception:  # noqa: BLE001 - a click that cannot be read is ignored, not a traceback
        log.exception("could not read the selection of %s", widget_key)
        return None


def _on_grid_select() -> None:
    picked = clicked_head(keys.GRID)
    if picked is not None:
        open_head(*picked)


def start(title: str, *, cross: bool = False, forward: bool = False):
    """Title, messages and a valid layer/head selection; returns the current state, or None
    when there is nothing to draw. For an encoder–decoder (`seq2seq_views.gate`): `cross`, the
    page draws cross-attention too; `forward`, the page runs the model itself."""
    st.title(title)
    cur = state.current()
    if not state.show_status(cur):
        return None
    why = seq2seq_views.gate(cur, cross=cross, forward=forward)
    if why is not None:
        st.info(why, icon="🔀")
        return None
    _clamp_selection(cur.run)
    return cur


def start_on_model(title: str, message: str):
    """`start` for a page that runs the sidebar's model itself: None, after `message`, while the
    model has not loaded or the sidebar's inputs are stale."""
    cur = start(title, forward=True)
    if cur is None:
        return None
    if cur.model is None or cur.stale:
        st.info(message, icon="ℹ️")
        return None
    return cur


def model_view() -> None:
    cur = start("Model view", cross=True)
    if cur is None:
        return
    if seq2seq_views.is_cross(cur.run):
        return seq2seq_views.cross_model_view(cur, _on_grid_select)
    run = cur.run
    layers = (f"layers {', '.join(map(str, run.layer_ids))} of {run.model_layers}" if run.partial
              else f"{run.num_layers} layers")
    st.caption(f"{state.plain(run.model_name)}: {layers} × {run.num_heads} heads, {run.n} tokens. "
               "Rows are layers, columns heads; each thumbnail is that head's attention "
               "(queries down, keys across). Click a thumbnail to open it in the head view.")
    rescale = st.toggle("Rescale each thumbnail to its own maximum", value=True, key=keys.GRID_RESCALE)
    fig = charts.cached("model_grid", (cur.key, rescale), lambda: head_figures.model_grid(run, rescale=rescale))
    charts.show(fig, key=keys.GRID, on_select=_on_grid_select, selection_mode="points", width="content")
    cols = st.columns([1, 1, 2])
    for key, top in ((keys.GRID_LAYER, run.num_layers - 1), (keys.GRID_HEAD, run.num_heads - 1)):
        session.settle(key, min(int(session.get(key, 0)), top))
    cols[0].selectbox("Layer", list(range(run.num_layers)), key=keys.GRID_LAYER,
                      format_func=lambda row: str(run.layer_ids[row]))  # rows are shown by layer number
    cols[1].number_input("Head", 0, run.num_heads - 1, key=keys.GRID_HEAD)
    cols[2].button("Open in head view", key=keys.GRID_OPEN_HEAD, type="primary", on_click=lambda: open_head(
        int(session.need(keys.GRID_LAYER)), int(session.need(keys.GRID_HEAD))))
    _lens_change(cur)
    _sink_mass(run)
    _learned_sinks(cur)
    _whole_text_overview(cur)


def _lens_change(cur) -> None:
    """With contributions shown (sidebar): how much each head's picture changed, as a grid of the
    JS divergence between its weights and its contributions."""
    run, weights = cur.run, cur.weights_run
    if not run.lens or weights is None:
        return
    st.subheader("How much contributions change each head")
    js = analysis.lens_divergence(cur.key, weights, run)
    fig = charts.cached("lens_js", cur.key, lambda: metric_figures.metric_grid(
        js, title="JS divergence (base 2) between weights and contributions, mean over queries",
        layer_ids=run.layer_ids))
    charts.show(fig, key=keys.LENS_JS_GRID, width="content")
    layer, head = np.unravel_index(int(js.argmax()), js.shape)
    st.caption(f"0: the head's contributions draw the same picture as its weights; 1: they share nothing. "
               f"Mean over heads {float(js.mean()):.3f}; most changed: layer {run.layer_ids[layer]}, head {head} "
               f"({float(js[layer, head]):.3f}), where the tokens it looks at write little through it.")


def _sink_mass(run) -> None:
    """With tokens hidden (sidebar): how much attention each head gave them, as a layers × heads grid."""
    if run.hidden is None:
        return
    st.subheader("Hidden attention (sink mass)")
    names = ", ".join(dict.fromkeys(run.hidden.removed_tokens))
    fig = metric_figures.metric_grid(run.hidden.mass, title="Attention to the hidden tokens, every head",
                                     layer_ids=run.layer_ids)
    charts.show(fig,
                    key=keys.SINK_MASS_GRID, width="content")
    st.caption(f"Each cell: the mean over the shown queries of the attention that went to the hidden tokens "
               f"({state.plain(names)}), before renormalising. 1 means the head looked at nothing else. "
               f"Mean over heads {float(run.hidden.mass.mean()):.3f}; "
               f"highest {float(run.hidden.mass.max()):.3f}.")


def _learned_sinks(cur) -> None:
    """A model with learned sink logits (GPT-OSS): how much of each row each head gave to no token,
    from the run before hiding tokens and before the lens."""
    run = cur.full_run or cur.run
    share = analysis.learned_sink_share(cur.key._replace(hidden=(), lens=""), run)
    if share is None:
        return
    st.subheader("Learned sinks")
    charts.show(metric_figures.metric_grid(share, title="Attention given to the learned sink, every head",
                                           layer_ids=run.layer_ids), key=keys.LEARNED_SINK_GRID, width="content")
    st.caption("This model's heads each have a learned sink logit: one more key in the softmax that is no token. "
               "Each cell: the mean over queries of what the sink took, 1 − Σ_j A_ij (each row's missing mass; the "
               f"heatmaps show the rest). Mean over heads {float(share.mean()):.3f}; highest {float(share.max()):.3f}.")


def _whole_text_overview(cur) -> None:
    """For a text longer than the app's cap: every head over the model's whole context,
    computed one head at a time (no layers × heads × n² array), on request. It reads past the
    session's token cap up to the model's context (on a public server, up to
    MHA_VIZ_MAX_OVERVIEW_TOKENS): `mha_viz.tokenize(..., whole_text=True)` decides."""
    model, text = cur.text_model, cur.text
    if model is None or not model.can_recompute:  # one head at a time: recomputed by our MHA
        return
    # the tokens the views use, before the sidebar's *Hide tokens*
    shown = (cur.full_run or cur.run).n if (cur.run is not None and not cur.stale) else 0
    try:  # reads only the part of a long text that the overview's limit needs
        n = mha_viz.tokenize(model, text, whole_text=True).n
    except mha_viz.InputError:
        return
    if n <= shown or n <= 2:
        return
    st.subheader("The whole text")
    full_cost = model.attention_bytes(n)
    st.caption((f"The views use the first {shown} tokens. " if shown else "")
               + f"{state.plain(model.name)} reads up to {model.max_positions}: an overview of every head over {n} "
               f"tokens is computed one head at a time (holding all of them would take "
               f"{state.size_text(full_cost)}). On a CPU this can take minutes.")
    key = (cur.model_key, text)
    store = session.setdefault(keys.OVERVIEWS, {})
    slot = st.empty()
    if key not in store and slot.button(f"Compute the overview of all {n} tokens", key=keys.WHOLE_OVERVIEW):
        slot.empty()  # the button goes once it has done its work
        bar = st.progress(0.0)
        try:
            def compute():
                with state.slots().hold():  # counts as an analysis for the server's limit
                    return mha_viz.overview(model, text, progress=lambda f, m: bar.progress(
                        min(f, 1.0), text=state.plain(m)))  # m names the model
            ov = state.one_at_a_time(compute)
        except Exception as exc:  # noqa: BLE001 - a message, and the rest of the page stays
            log.exception("whole-text overview failed")
            st.error(state.plain(f"The overview could not be computed ({type(exc).__name__}: {str(exc)[:200]})."))
            return
        bar.empty()
        store.clear()  # one at a time: each holds layers × heads thumbnails only, but texts add up
        store[key] = ov
    if key in store:
        ov = store[key]
        rescale = session.get(keys.GRID_RESCALE, True)
        fig = charts.cached("whole_grid", (key, ov.n, rescale),
                            lambda: head_figures.grid_figure(ov.pooled, rescale=rescale, clickable=False))
        charts.show(fig, key=keys.WHOLE_GRID, width="content")
        st.caption(f"All {ov.n} tokens, each head max-pooled to {ov.pooled.shape[-1]} × {ov.pooled.shape[-1]}."
                   + (" Attention weights: the sidebar's contributions lens applies to the analysed tokens only."
                      if cur.run is not None and cur.run.lens else "")
                   + (f" The head view shows the first {shown}." if shown else ""))


def head_view() -> None:
    cur = start("Head view", cross=True)
    if cur is None:
        return
    if seq2seq_views.is_cross(cur.run):
        return seq2seq_views.cross_head_view(cur)
    run = cur.run
    cols = st.columns([2, 2, 3])
    layer = cols[0].selectbox("Layer", list(range(run.num_layers)), index=session.need(keys.SEL_LAYER),
                              format_func=lambda row: str(run.layer_ids[row]))
    head = cols[1].selectbox("Head", list(range(run.num_heads)), index=session.need(keys.SEL_HEAD))
    session.put_all((keys.SEL_LAYER, keys.SEL_HEAD), (layer, head))
    rescale = cols[2].toggle("Rescale colours to this head's maximum", key=keys.HEAD_RESCALE,
                             help="Off: the colour scale spans 0..1 for every head, so heads compare. "
                                  "On: it spans 0..this head's largest weight, to see weak patterns.")
    charts.show(_head_figure(cur, layer, head, rescale), key=keys.HEAD_HEATMAP)
    examples_link(cur, layer, head)
    a = run.head(layer, head)
    top = a.argmax(axis=1)
    st.caption("Row i: how query token i spreads its attention over the keys (each row sums to 1)."
               + (" Causal model: a token sees only itself and earlier tokens." if run.is_causal else ""))
    with st.expander("Strongest key for each query"):
        st.dataframe(
            {"query": run.tokens, "attends most to": [run.tokens[j] for j in top],
             "weight": [round(float(a[i, j]), 4) for i, j in enumerate(top)]},
            hide_index=True,
        )


FULL, WINDOW, BLOCKS, WORDS = "every token", "a token window", "all tokens, in blocks", "words"
SUBSET = "chosen queries and keys"  # subset_views: a range of queries over a range of keys


def head_heatmap(cur, layer: int, head: int, rescale: bool, window: tuple[int, int] | None = None):
    """`head_figures.head_heatmap` of the current run, made once per server (`charts.cached`)."""
    return charts.cached("head_heatmap", (cur.key, layer, head, rescale, window),
                         lambda: head_figures.head_heatmap(cur.run, layer, head, rescale=rescale, window=window))


def _head_figure(cur, layer: int, head: int, rescale: bool):
    """The head at the level of detail the user picked; long inputs open on the block view,
    since every token of every pair would be n² cells to send and to see."""
    run = cur.run
    options = ([FULL, WINDOW, BLOCKS, WORDS] if run.n <= detail.MAX_FULL_TOKENS else [WINDOW, BLOCKS, WORDS]) + [SUBSET]
    default = FULL if head_figures.default_level(run.n) == head_figures.TOKENS else BLOCKS
    this_run = (run.model_name, run.text, run.n)
    changed = session.get(keys.DETAIL_RUN) != this_run
    session.put(keys.DETAIL_RUN, this_run)
    forced = session.get(keys.DETAIL_FORCED, False)  # blocks chosen by the app, not the user
    changed = changed and not session.pop(keys.DETAIL_LINKED, False)  # a shared link chose it
    if session.get(keys.HEAD_DETAIL) not in options or (changed and (default == BLOCKS or forced)):
        session.put(keys.HEAD_DETAIL, default)  # a new long input opens on the block view, and a
        session.put(keys.DETAIL_FORCED, default == BLOCKS)  # short one after it on every token
    mode = st.radio("Detail", options, key=keys.HEAD_DETAIL, horizontal=True,
                    on_change=lambda: session.put(keys.DETAIL_FORCED, False),
                    help="Blocks: the whole matrix downsampled; each block shows its largest weight, so a "
                         "single strong cell stays visible (hover for max and mean). Words: word pieces "
                         "merged (sum over a word's keys, mean over its queries).")
    if mode == WINDOW:
        width = min(run.n, 96)
        session.setdefault(keys.HEAD_WINDOW, (0, width))
        lo, hi = session.need(keys.HEAD_WINDOW)
        if hi > run.n or lo >= hi:
            session.put(keys.HEAD_WINDOW, (0, width))
        start, stop = st.slider("Tokens", 0, run.n, key=keys.HEAD_WINDOW,
                                help="The tokens shown on both axes, at full resolution.")
        return head_heatmap(cur, layer, head, rescale, (int(start), int(max(stop, start + 1))))
    if mode == SUBSET:
        return subset_views.subset_figure(run, layer, head, rescale)
    if mode == BLOCKS:
        return charts.cached("head_pooled", (cur.key, layer, head, rescale),
                             lambda: head_figures.head_pooled(run, layer, head, rescale=rescale))
    if mode == WORDS:
        return charts.cached("head_words", (cur.key, layer, head, rescale),
                             lambda: head_figures.head_words(run, layer, head, rescale=rescale))
    return head_heatmap(cur, layer, head, rescale)


def facts_view() -> None:
    cur = start("Model facts")
    if cur is None or cur.model is None:
        return
    facts = cur.model.facts()
    shown = facts | {k: state.plain(facts[k]) for k in ("model", "loaded from")}  # user-given names: as typed
    st.table({"fact": list(shown), "value": list(shown.values())})
    st.download_button("Download these facts (CSV)", export_views.table_csv(facts), key=keys.DL_FACTS,
                       file_name=figure_style.safe_filename(f"{cur.model.name}-facts") + ".csv", mime="text/csv")
