"""Encoder–decoders in the app (T5, BART, Marian…): the sidebar's target text and its
*Attention: Encoder | Decoder | Cross* picker (as BertViz's drop-down), which pages read which
part, and the cross-attention's model view and head view (rectangular: target tokens down,
source tokens across).

Encoder and Decoder are ordinary runs (`AttentionRun`): every page that reads the run draws
them. Cross is drawn by the Model view, the Head view, the Line view (target left, source right),
Token focus (a target token over the source, or a source token over the target) and Head metrics
(the metrics defined for a rectangular pattern); the other pages say so. Pages that run
the model themselves (teaching, switching heads off, queries and keys, generation, corpus,
comparison) say that they take encoder-only and decoder-only models.
"""

from __future__ import annotations

import html

import streamlit as st

import mha_viz
from mha_viz.drawing import cross as cross_figures
from mha_viz.drawing import focus as focus_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import style as figure_style
from mha_viz.metrics import cross_attention as cross_metrics
from mha_viz.ui.kit import charts, keys, session, shared_head
from mha_viz.ui.kit.text import plain
from mha_viz.views import focus

PARTS = {"Encoder": "encoder", "Decoder": "decoder", "Cross": "cross"}


def target_inputs() -> tuple[str | None, str]:
    """The target box and the part picker, in the sidebar (an encoder–decoder is loaded);
    returns (target text or None: the model writes it, part: "encoder" | "decoder" | "cross")."""
    with st.sidebar:
        st.text_area("Target text (empty: the model writes it)", key=keys.TARGET, persist_state=keys.KEEP,
                     height=80, placeholder="e.g. a translation of the sentence above",
                     help="An encoder–decoder reads the sentence above (the source) and writes a target. "
                          "Type one to see how the model reads it, or leave this empty: the model writes "
                          "its own, greedily (at most 32 tokens).")
        session.start_at(keys.ATTN_PART, "Encoder", lambda part: part in PARTS)
        part = st.segmented_control(
            "Attention", list(PARTS), required=True, key=keys.ATTN_PART,
            persist_state=keys.KEEP,
            help="Encoder: the source's self-attention. Decoder: the target's (causal) self-attention. "
                 "Cross: each target token over the source tokens.")
    target = session.get(keys.TARGET) or ""
    return (target if target.strip() else None), PARTS.get(part or "Encoder", "encoder")


def is_cross(run) -> bool:
    return isinstance(run, mha_viz.capture.CrossAttention)


def gate(cur, *, cross: bool, forward: bool) -> str | None:
    """Why a page cannot draw the current encoder–decoder's run (None: it can). `cross`: the
    page draws cross-attention; `forward`: the page runs the model itself."""
    if cur.seq2seq is None:
        return None
    if forward:
        return (f"{plain(cur.model.name) if cur.model else 'This model'} is an encoder–decoder: this page runs "
                "encoder-only and decoder-only models. Its encoder, decoder and cross-attention are on the Model "
                "view and Head view (and the encoder's and decoder's on every page under Look and Measure): pick "
                "one under *Attention* in the sidebar.")
    if is_cross(cur.run) and not cross:
        return ("This page reads self-attention: pick Encoder or Decoder under *Attention* in the sidebar. "
                "Cross-attention (target over source) is drawn in the Model view, the Head view, the Line view, "
                "Token focus and Head metrics.")
    return None


def status(cur) -> None:
    """What the run shown is (above every page, for an encoder–decoder)."""
    res = cur.seq2seq
    if res is None:
        return
    side = {"encoder": "the encoder's self-attention over the source",
            "decoder": "the decoder's causal self-attention over the target",
            "cross": "cross-attention: each target token over the source"}[cur.key.part]
    how = "written by the model (greedy)" if res.written else "as typed"
    st.caption(f"Encoder–decoder: showing {side}. Source {res.encoder.n} tokens; target {res.decoder.n} "
               f"tokens, {how}: “{plain(res.target)}”.")


def cross_model_view(cur, on_select, rescale_key: str) -> None:
    """The cross-attention's grid; `on_select`: the model view's click handler (it reads the
    chart `keys.GRID`, whatever the run); `rescale_key`: the page's toggle of each thumbnail's own scale."""
    cross = cur.run
    st.caption(f"Cross-attention: {cross.num_layers} decoder layers × {cross.num_heads} heads, {cross.n_queries} "
               f"target tokens (queries, down) over {cross.n_keys} source tokens (keys, across). Click a "
               "thumbnail to open it in the head view.")
    session.start_at(rescale_key, True)
    rescale = st.toggle("Rescale each thumbnail to its own maximum", key=rescale_key,
                        persist_state=keys.KEEP)
    fig = charts.cached("cross_grid", (cur.key, rescale), lambda: cross_figures.cross_grid(cross, rescale=rescale))
    charts.show(fig, key=keys.GRID, on_select=on_select, selection_mode="points", width="content")


def cross_head_view(cur, rescale_key: str) -> None:
    """One decoder head's cross-attention; `rescale_key`: the page's toggle of the head's own colour scale."""
    cross = cur.run
    cols = st.columns([2, 2, 3])
    layer, head = shared_head.pick_head(cross.layer_ids, cross.num_heads, keys.HEAD_VIEW_LAYER, keys.HEAD_VIEW_HEAD,
                                   where=cols[:2])
    rescale = cols[2].toggle("Rescale colours to this head's maximum", key=rescale_key,
                             persist_state=keys.KEEP)
    fig = charts.cached("cross_heatmap", (cur.key, layer, head, rescale),
                        lambda: cross_figures.cross_heatmap(cross, layer, head, rescale=rescale))
    charts.show(fig, key=keys.CROSS_HEATMAP)
    a = cross.head(layer, head)
    top = a.argmax(axis=1)
    st.caption("Row i: how target token i spreads its attention over the source tokens (each row sums to 1).")
    with st.expander("Strongest source token for each target token"):
        st.dataframe({"target token": cross.query_tokens, "attends most to": [cross.key_tokens[j] for j in top],
                      "weight": [round(float(a[i, j]), 4) for i, j in enumerate(top)]}, hide_index=True)


def cross_metrics_view(cur, choice_key: str) -> None:
    """The metrics defined for a rectangular pattern, every decoder head (`cross_metrics`); `choice_key`: the
    page's choice of metric."""
    cross = cur.run
    table = charts.cached("cross_table", (cur.key,), lambda: cross_metrics.cross_table(cross))
    choice = st.selectbox("Metric", list(cross_metrics.COLUMNS), key=choice_key,
                          persist_state=keys.KEEP, format_func=lambda c: c.replace("_", " "))
    st.caption(cross_metrics.COLUMNS[choice].capitalize() + ". The other head metrics ("
               + ", ".join(cross_metrics.SELF_ONLY) + ") are about a text attending to itself: they apply to "
               "self-attention (pick Encoder or Decoder in the sidebar).")
    values = table[choice].to_numpy().reshape(cross.num_layers, cross.num_heads)
    fig = charts.cached("cross_metric_grid", (cur.key, choice), lambda: metric_figures.metric_grid(
        values, title=f"Cross-attention {choice.replace('_', ' ')}, every decoder head"))
    charts.show(fig, key=keys.CROSS_METRIC_GRID, width="content")
    st.dataframe(table, hide_index=True, key=keys.CROSS_TABLE_DF,
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in cross_metrics.COLUMNS})
    st.download_button("Download the cross-attention table (CSV)", lambda: table.to_csv(index=False).encode(),
                       on_click="ignore", file_name=f"{figure_style.safe_filename(cross.model_name)}-cross-table.csv",
                       mime="text/csv", key=keys.DL_CROSS_TABLE)


TARGET_SIDE, SOURCE_SIDE = "a target token: what it reads in the source", "a source token: which target tokens read it"


def cross_focus_view(cur, side_key: str, token_key: str, rescale_key: str) -> None:
    """One token of either side and its cross-attention in every decoder head, under the page's keys of the side,
    the token and the rescaling."""
    cross = cur.run
    side = st.radio("Focus on", (TARGET_SIDE, SOURCE_SIDE), key=side_key, persist_state=keys.KEEP,
                    horizontal=True)
    target = side == TARGET_SIDE
    names, others = (cross.query_tokens, cross.key_tokens) if target else (cross.key_tokens, cross.query_tokens)
    if session.get(token_key, 0) >= len(names):
        session.put(token_key, 0)
    index = st.selectbox("Token", list(range(len(names))), key=token_key,
                         format_func=lambda i: f"{i}: {names[i]}")
    rescale = st.toggle("Rescale to the largest weight", key=rescale_key, persist_state=keys.KEEP)
    values = cross.attentions[..., index, :] if target else cross.attentions[..., :, index]  # (L, H, m)
    f = focus.Focus(index, list(others), values, values)
    name = html.escape(names[index], quote=False)
    what = (f"what target token {index} ({name}) reads in the source" if target
            else f"which target tokens read source token {index} ({name})")
    fig = charts.cached("cross_focus", (cur.key, target, index, rescale), lambda: focus_figures.focus_grid(
        f, focus.TO if target else focus.BY, cross.layer_ids, rescale=rescale, what=what,
        x_title="source token" if target else "target token"))
    charts.show(fig, key=keys.CROSS_FOCUS_GRID)
    s = focus.summarize(values, exclude=None)
    st.caption(f"Strongest: decoder layer {s.top_layer}, head {s.top_head} — {s.top_position}: "
               f"{plain(others[s.top_position])} ({s.top_weight:.3f}).")


def steps_view(cur, step_key: str) -> None:
    """The Generate page for an encoder–decoder: the target it wrote (or read), one step at a
    time: the token, how likely the decoder found it and what else it considered, and where every
    decoder head looked when choosing it, in the source (cross-attention) and in the target so far. `step_key`: the
    page's step slider."""
    res = cur.seq2seq
    if cur.stale or res is None or res.model_name != cur.text_model.name:
        if cur.error:
            st.error(plain(cur.error), icon=":material/warning:")
        st.info("An encoder–decoder writes its target from the sidebar's sentence (leave its Target box empty); "
                "once it is analysed, its steps show here.", icon=":material/edit:")
        return
    if not res.steps:
        st.info("The target has no token after the decoder's start: type a longer target, or leave the Target "
                "box empty and the model writes one.", icon=":material/edit:")
        return
    how = ("wrote, greedily (the sidebar's Target box is empty)" if res.written
           else "was given (the sidebar's Target box); each step shows how likely it found the typed token")
    st.caption(f"An encoder–decoder writes its target from the source. This is the target the model {how}: "
               f"“{plain(res.target)}”. Step t's token was chosen at decoder row t − 1.")
    n = len(res.steps)
    if session.get(step_key, 1) > n:
        session.put(step_key, 1)
    t = st.slider("Step", 1, n, key=step_key) if n > 1 else 1
    step = res.steps[t - 1]
    others = ", ".join(f"{plain(tok)} ({p:.3f})" for tok, p in step.top[:5])
    st.markdown(f"**Step {t}: {plain(step.token)}** — probability {step.prob:.3f}, entropy {step.entropy:.2f} nats. "
                f"Most likely: {others}.")
    row = t - 1
    for part, labels, what, x_title in (
            (res.cross, res.encoder.tokens, "in the source", "source token"),
            (res.decoder, res.decoder.tokens, "in the target so far", "target token")):
        values = part.attentions[:, :, row, :]  # (L, H, m): decoder row `row` of every head
        f = focus.Focus(row, list(labels), values, values)
        fig = charts.cached("s2s_step", (cur.key._replace(part=""), x_title, row), lambda: focus_figures.focus_grid(
            f, focus.TO, part.layer_ids,
            what=f"where step {t} looked {what} (decoder row {row})", x_title=x_title))
        charts.show(fig, key=f"{keys.S2S_STEP_PREFIX}{x_title.split()[0]}")
