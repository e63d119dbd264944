"""The teaching view: attention step by step with the model's real numbers, costs, and three
demonstrations (the ablation view is `ablation_page`). The page is in parts (three groups of
steps, the costs, the demonstrations), one on screen at a time: only that part is computed and
drawn, so the page opens as fast as the others (the text's one recorded forward pass is shared)."""

from __future__ import annotations

from typing import Callable, Hashable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import mha_viz_models
from mha_viz.features.teaching import controls as teaching_keys
from mha_viz.features.teaching import figures as teach_figures
from mha_viz.metrics.measures import PATTERN_CLASSES, PATTERN_MEANING
from mha_viz.ui.kit import analysis, charts, keys, resources, session, shared_head, walk_window
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button, sidebar
from mha_viz.ui.shell.view_helpers import start
from mha_viz.views import teaching

TOY = "toy-induction"
TOY_TEXT = "q w e r t y u i o q w e r t y u i o"


def _use_toy() -> None:
    sidebar.choose(model=TOY, text=TOY_TEXT)
    session.put(teaching_keys.TEACH_PICK, "induction")


def _pick_known_head(cur) -> None:
    """For the toy model, open on its induction head (the best layer-1 induction score)."""
    if session.pop(teaching_keys.TEACH_PICK, None) != "induction" or cur.model.name != TOY:
        return
    table = analysis.head_table(cur.key, cur.run, cur.model)
    best = table.loc[table["induction_score"].idxmax()]
    shared_head.choose_head(cur.run.layer_ids.index(int(best["layer"])), int(best["head"]))


def teaching_page() -> None:
    cur = start("teaching", forward=True)
    if cur is None:
        return
    run, model = cur.run, cur.model
    if TOY in mha_viz_models.BUNDLED and model.name != TOY:
        st.button("Start with toy-induction: two layers whose heads have known jobs (a previous-token "
                  "head and an induction head)", key=teaching_keys.TEACH_USE_TOY, on_click=_use_toy)
    if not model.can_recompute:
        st.info(f"The walkthrough recomputes each step with mha-viz's own MHA, which cannot compute {model.name}'s "
                f"attention: {model.stand_in or model.unread}. Every other page shows its heads.",
                icon=":material/info:")
        return
    _pick_known_head(cur)
    row, head = shared_head.pick_head(run.layer_ids, run.num_heads, teaching_keys.TEACH_LAYER, teaching_keys.TEACH_HEAD)
    layer = run.layer_ids[row]
    if model.name == TOY:
        table = analysis.head_table(cur.key, run, model)
        r = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
        st.caption(f"toy-induction, layer {layer} head {head}: previous-token score {r.prev_token_score:.2f}, "
                   f"induction score {r.induction_score:.2f}. Layer 0 has a head that looks one token back; "
                   "layer 1 has a head that looks at the token after the previous occurrence of the current "
                   "one, and so predicts the repeat.")
    # what the steps read: model, text, cap (not the layers or hidden tokens), every token, hidden or not
    text_key, full = cur.key.with_text(cur.key.text), cur.full_run or run
    first = walk_window.window_start(full.n)
    w, error = resources.attempt(lambda: analysis.walkthrough(text_key, layer, head, first, model, full),
                                 what="The walkthrough", out_of_memory="The walkthrough ran out of memory: use a "
                                                                       "shorter text or a smaller model.")
    if error:
        st.warning(plain(error), icon=":material/warning:")
        return
    if full.n > w.n:
        st.caption(walk_window.caption(w, full.n))
    st.subheader(f"Layer {w.layer}, head {w.head}, with the model's numbers")
    session.start_at(teaching_keys.TEACH_PART, PARTS[0], lambda part: part in PARTS)
    part = st.segmented_control("Part", PARTS, required=True, key=teaching_keys.TEACH_PART,
                                persist_state=keys.KEEP, label_visibility="collapsed")
    notebook_button.record(layer=row, head=head, part=part, row=session.get(teaching_keys.TEACH_ROW),
                           demo=session.get(teaching_keys.TEACH_DEMO), start=w.start)
    if part in STEP_GROUPS:  # only the part on screen is computed and drawn
        names = STEP_GROUPS[part]
        figs = _figures("steps", (text_key, layer, head, w.start, names), lambda: teach_figures.step_figures(w, names))
        STEP_DRAWERS[part](w, figs)
    elif part == COSTS:
        _costs(model, run.n, head)
    else:
        _demonstrations(cur, w)


FIGURES_KEPT = 24  # sets of figures (one head's steps, one demonstration) the server keeps


@st.cache_resource(show_spinner=False, max_entries=FIGURES_KEPT)
def _cached_figures(kind: str, key, _build: Callable[[], dict[str, go.Figure]]) -> dict[str, go.Figure]:
    return _build()


def _figures(kind: str, key: Hashable, build: Callable[[], dict[str, go.Figure]]) -> dict[str, go.Figure]:
    """The figures `build()` makes, made once per server for (`kind`, `key`) and shared by every
    session (like `charts.cached`, one entry for a whole set): `key` names everything they are
    drawn from (the run's AnalysisKey, layer, head), and nobody changes them afterwards."""
    return _cached_figures(kind, key, build)


def _draw_step(number: int, title: str, formula: str, shape: str, figure=None, note: str = "") -> None:
    st.markdown(f"**{number}. {title}** · shape {shape}")
    st.latex(formula)
    if note:
        st.caption(note)
    if figure is not None:
        charts.show(figure, key=f"{teaching_keys.TEACH_STEP_PREFIX}{number}")


def _projections_formula(bias: bool) -> str:
    """Step 2's formula: with the biases b_Q, b_K, b_V only where the model's projections have them."""
    b = (lambda name: f" + b_{name}") if bias else (lambda name: "")
    return rf"Q = X W_Q{b('Q')},\quad K = X W_K{b('K')},\quad V = X W_V{b('V')}"


def _output_formula(bias: bool) -> str:
    """Step 9's formula: with b_O only where the model's W_O has one."""
    return r"\mathrm{MultiHead}(X) = \mathrm{Concat}(z_1, \dots, z_h)\, W_O" + (" + b_O" if bias else "")


def _inputs(w: teaching.Walkthrough, figs: dict[str, go.Figure]) -> None:
    n, d, d_k, d_v = w.n, w.X.shape[1], w.Q.shape[1], w.V.shape[1]
    H = w.num_heads
    _draw_step(1, "Input X", r"X \in \mathbb{R}^{n \times d_{model}}", f"{n} × {d}", figs["X"],
          "What this layer receives: one vector per token (after the layer norm in pre-LN models).")
    kv = f" (KV head {w.kv_head}, shared by {H // w.num_kv_heads} query heads)" if w.num_kv_heads != H else ""
    rope = " Then rotary position embeddings turn q and k by an angle that grows with the position." if w.rope else ""
    if w.q_norm:
        rope = " Each head's q and k then pass an RMSNorm over their d_k values." + rope
    _draw_step(2, "Queries, keys, values", _projections_formula(w.qkv_bias),
          f"Q {n} × {d_k}, K {n} × {d_k}, V {n} × {d_v}; W_Q, W_K {d} × {d_k}, W_V {d} × {d_v}",
          note=f"This head's own projections{kv}{'' if w.qkv_bias else ', without biases (this model has none)'}."
          + rope)
    for col, name in zip(st.columns(3), "QKV"):
        charts.show(figs[name], key=f"{teaching_keys.TEACH_STEP2_PREFIX}{name}", where=col)


def _scores(w: teaching.Walkthrough, figs: dict[str, go.Figure]) -> None:
    n, d_k = w.n, w.Q.shape[1]
    square = f"{n} × {n}" + (" and the column of the other keys" if w.outside else "")
    _draw_step(3, "Scores", r"S = Q K^\top", square, figs["scores"],
          "Entry (i, j): how well query i matches key j (a dot product).")
    _draw_step(4, "Scaling", r"S' = \frac{Q K^\top}{\sqrt{d_k}}" + rf"\quad (\sqrt{{{d_k}}} = {1 / w.scale:.3g})",
          square, figs["scaled"],
          "Without it, dot products of d_k-dimensional vectors grow like √d_k and softmax saturates."
          + (f" This model then soft-caps the scores: S' ← {w.softcap:g} · tanh(S' / {w.softcap:g}), so none "
             f"passes ±{w.softcap:g}." if w.softcap is not None else "")
          + (f" (This model's scale is {w.scale:.4g}, not 1/√d_k.)" if abs(w.scale * d_k ** 0.5 - 1) > 1e-3 else ""))
    if w.is_causal:
        window = (f" This layer also has a sliding window of {w.window} tokens: keys {w.window} or more "
                  "positions back are hidden too.") if w.window is not None else ""
        _draw_step(5, "Causal mask", r"S'_{ij} = -\infty \text{ for } j > i", square, figs["masked"],
              "A decoder's token may not look at later tokens: their scores become −∞, so softmax gives them 0."
              + window)
    elif w.window is not None:  # an encoder's local layer (ModernBERT)
        _draw_step(5, "Local window", rf"S'_{{ij}} = -\infty \text{{ for }} |i - j| > {w.window}", square,
              figs["masked"], f"This layer of the encoder is local: each token sees the {w.window} tokens on either "
              "side of it (and itself); the other scores become −∞, so softmax gives them 0.")
    else:
        _draw_step(5, "Mask", r"\text{(none: an encoder lets every token see every token)}", square,
              note="Padding keys would be masked here; a single sentence has none.")
    _draw_step(6, "Softmax, row by row", r"A_{ij} = \frac{e^{S'_{ij}}}{\sum_{k} e^{S'_{ik}}}", square,
          figs["probs"], "Each row is a probability distribution over the keys: it sums to 1.")
    _query_row(w)


def _output(w: teaching.Walkthrough, figs: dict[str, go.Figure]) -> None:
    n, d, d_v = w.n, w.X.shape[1], w.V.shape[1]
    H = w.num_heads
    _draw_step(7, "Weighted sum of values", r"z = A V", f"{n} × {d_v}", figs["z"],
          "Each token's output is the average of the value vectors, weighted by its row of A.")
    _draw_step(8, "Concatenate all heads", r"\mathrm{Concat}(z_1, \dots, z_h)", f"{n} × {H * d_v} (h = {H})",
          figs["concat"])
    _draw_step(9, "Output projection", _output_formula(w.out_bias),
          f"{n} × {d}; W_O {H * d_v} × {d}", figs["output"],
          f"Head {w.head}'s share is z W_O[{w.head}] (its {d_v} rows of W_O); the output is the sum of "
          + ("every head's share plus the bias." if w.out_bias
             else "every head's share (this model's W_O adds no bias)."))


STEPS_IN, STEPS_SCORES, STEPS_OUT = "1–2 · Input, Q, K, V", "3–6 · Scores to probabilities", "7–9 · Output"
COSTS, DEMOS = "What it costs", "Demonstrations"
PARTS = (STEPS_IN, STEPS_SCORES, STEPS_OUT, COSTS, DEMOS)
STEP_GROUPS = {STEPS_IN: ("X", "Q", "K", "V"), STEPS_SCORES: ("scores", "scaled", "masked", "probs"),
               STEPS_OUT: ("z", "concat", "output")}  # the figures of each group of steps
STEP_DRAWERS = {STEPS_IN: _inputs, STEPS_SCORES: _scores, STEPS_OUT: _output}


@st.fragment
def _query_row(w: teaching.Walkthrough) -> None:
    """One query's scores and probabilities; moving the slider reruns only this part."""
    n = w.n
    if n > 1:
        session.start_at(teaching_keys.TEACH_ROW, min(n - 1, n // 2), lambda row: 0 <= int(row) < n)
    i = st.slider("Query row to look at", 0, n - 1, key=teaching_keys.TEACH_ROW) if n > 1 else 0
    charts.show(teach_figures.softmax_row(w, i), key=teaching_keys.TEACH_SOFTMAX_ROW)


def _costs(model, n: int, head: int) -> None:
    rows = []
    for c in teaching.costs(model, n):
        rows.append({"variant": c.name, "KV heads": c.kv_heads,
                     "multiply–adds (one layer)": f"{c.multiply_adds:,}",
                     "of which scores + weighted sum": f"{c.scores + c.weighted_sum:,}",
                     "KV cache floats (one layer)": f"{c.kv:,}",
                     "probabilities stored (unless fused)": f"{c.probabilities:,}",
                     "memory, float32": resources.size_text(4 * c.floats)})
    st.table(pd.DataFrame(rows), hide_index=True)  # a few rows: static, no grid to load and draw
    st.caption(f"n = m = {n} tokens, d_model = {model.d_model}, h = {model.num_heads}, d_k = d_v = {model.d_k}. "
               "Multiply–adds: projections d_model·(h·n·d_k + G·m·d_k + G·m·d_v), scores h·n·m·d_k, weighted "
               "sum h·n·m·d_v, output h·n·d_v·d_model (the n² terms hold only for self-attention, m = n). "
               "Memory: Q h·n·d_k, K and V G·m·d_k and G·m·d_v, probabilities h·n·m (fused kernels such as "
               "FlashAttention never store them), z h·n·d_v. Sharing K/V (GQA, "
               "MQA) shrinks the K/V projections and the KV cache, not the scores.")
    if 1 < model.num_kv_heads < model.num_heads or model.num_kv_heads == 1:
        fig = charts.cached("teach_gqa", (model.num_heads, model.num_kv_heads, head),
                            lambda: teach_figures.kv_sharing(model.num_heads, model.num_kv_heads, highlight=head))
        charts.show(fig, key=teaching_keys.TEACH_GQA)


PROJECTIONS, HEADS, MASKS = "Why projections", "Why several heads", "Masks"


def _demonstrations(cur, w: teaching.Walkthrough) -> None:
    """One demonstration at a time, drawn once picked (the one picked is the only one computed
    and drawn; none until then: the steps above are what the page opens on)."""
    pick = st.segmented_control("Demonstration", (PROJECTIONS, HEADS, MASKS), default=None,
                                key=teaching_keys.TEACH_DEMO, persist_state=keys.KEEP, label_visibility="collapsed")
    key = (cur.key.with_text(cur.key.text), w.layer, w.head, w.start)
    if pick is not None and w.outside:
        st.caption(f"The maps use the window's {w.n} keys: Why projections and Why several heads show the model's "
                   f"probabilities on them (the {w.outside:,} keys outside take the rest of each row); Masks "
                   "softmaxes the window's scores alone, as if the text were these tokens.")
    if pick is None:
        st.caption("Pick one: why Q and K need projections, why several heads, what the masks do.")
    elif pick == HEADS:
        _why_heads(cur, w)
    elif pick == MASKS:
        st.markdown("The same scores, softmaxed two ways: an **encoder** (BERT) lets every token see every "
                    "token; a **decoder** (GPT) hides later tokens, so row i spreads over tokens 0…i only.")
        figs = _figures("masks", key, lambda: teach_figures.probability_maps({
            "encoder: bidirectional": teaching.softmax_rows(w.scaled),
            "decoder: causal": teaching.softmax_rows(w.scaled, causal=True)}, w.tokens))
        _pair(figs, ("demo_enc", "demo_dec"))
    else:
        _why_projections(key, w)


def _pair(figs: dict[str, go.Figure], keys_: tuple[str, str]) -> None:
    """Two figures side by side, in the order they were made."""
    for col, fig, k in zip(st.columns(2), figs.values(), keys_):
        charts.show(fig, key=k, where=col)


def _why_projections(key, w: teaching.Walkthrough) -> None:
    st.markdown("With **Q = K = V = X** and token vectors of one length (X̂: each row scaled to length √d, the "
                "size a layer norm leaves), every token attends most to itself: x·x = d ≥ x·y. Learned W_Q and "
                "W_K let a head look elsewhere.")
    figs = _figures("projections", key, lambda: teach_figures.probability_maps({
        "softmax(X̂ X̂ᵀ/√d), no projections": teaching.self_similarity(w.X, True),
        "this head, with W_Q and W_K": w.probs}, w.tokens))
    _pair(figs, ("demo_noproj", "demo_proj"))
    st.markdown("The claim needs **normalised** vectors. With raw vectors a longer neighbour pointing the "
                "same way wins: below, *b* = (0.6, 0.8) and *c* = 3·*b*, so b·c = 3 > b·b = 1.")

    def example() -> dict[str, go.Figure]:
        names, vecs = teaching.longer_neighbour_example()
        return teach_figures.probability_maps({
            "raw vectors: b looks at c": teaching.self_similarity(vecs, False),
            "normalised: b looks at itself (and c, a tie)": teaching.self_similarity(vecs, True)}, names)
    _pair(_figures("longer_neighbour", (), example), ("demo_raw", "demo_norm"))


def class_note(patterns: list[str]) -> str:
    """Each class these heads have (named in their titles), what it means, in the order of `PATTERN_CLASSES`."""
    present = {p.split(":")[0] for p in patterns}
    said = [f"**{c}** {PATTERN_MEANING[c]}" for c in PATTERN_CLASSES if c in present]
    return ("Each head's title gives its class: " + "; ".join(said)
            + " (the rules are under *Head metrics*, read beyond the first token).")


def _why_heads(cur, w: teaching.Walkthrough) -> None:
    run, model = cur.run, cur.model
    st.markdown(f"One head can put each query's attention in one place. Layer {w.layer}'s "
                f"{run.num_heads} heads split the work; their average (what a single averaged head would "
                "see) blurs it.")

    table = analysis.head_table(cur.key, run, model)
    patterns = table[table["layer"] == w.layer]["pattern"].tolist()

    def build() -> dict[str, go.Figure]:
        text_key = cur.key.with_text(cur.key.text)
        att = analysis.layer_probabilities(text_key, w.layer, w.start, model, cur.full_run or run)  # (H, n, n)
        maps = {"the layer's heads averaged": att.mean(0)}
        maps |= {f"head {h}: {patterns[h]}": att[h] for h in range(run.num_heads)}
        return teach_figures.probability_maps(maps, w.tokens)
    figs = list(_figures("heads", (cur.key, w.layer, w.start), build).values())
    charts.show(figs[0], key=teaching_keys.TEACH_DEMO_MEAN)
    st.caption(class_note(patterns))
    cols = st.columns(3)
    for h, fig in enumerate(figs[1:]):
        charts.show(fig, key=f"{teaching_keys.TEACH_DEMO_HEAD_PREFIX}{h}", where=cols[h % 3])
