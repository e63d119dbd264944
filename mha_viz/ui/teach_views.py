"""The teaching view: attention step by step with the model's real numbers, costs, and three
demonstrations (the ablation view is `ablation_views`)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import mha_viz
from mha_viz import teach_figures, teaching
from mha_viz.ui import analysis, charts, keys, state
from mha_viz.ui.views import start

TOY = "toy-induction"
TOY_TEXT = "q w e r t y u i o q w e r t y u i o"


def _use_toy() -> None:
    st.session_state[keys.MODEL_CHOICE] = TOY
    st.session_state[keys.TEXT] = TOY_TEXT
    st.session_state[keys.TEACH_PICK] = "induction"


def _layer_head(run, layer_key: str, head_key: str):
    """Layer (model numbering) and head pickers; returns (row of the run, model layer, head)."""
    cols = st.columns(2)
    rows = list(range(run.num_layers))
    row = cols[0].selectbox("Layer", rows, key=layer_key, format_func=lambda r: str(run.layer_ids[r]))
    head = cols[1].selectbox("Head", list(range(run.num_heads)), key=head_key)
    return row, run.layer_ids[row], head


def _pick_known_head(cur) -> None:
    """For the toy model, open on its induction head (the best layer-1 induction score)."""
    if st.session_state.pop(keys.TEACH_PICK, None) != "induction" or cur.model.name != TOY:
        return
    table = analysis.head_table(cur.key, cur.run, cur.model)
    best = table.loc[table["induction_score"].idxmax()]
    st.session_state[keys.TEACH_LAYER] = cur.run.layer_ids.index(int(best["layer"]))
    st.session_state[keys.TEACH_HEAD] = int(best["head"])


def teaching_view() -> None:
    cur = start("Teaching: attention step by step")
    if cur is None:
        return
    run, model = cur.run, cur.model
    if TOY in mha_viz.BUNDLED and model.name != TOY:
        st.button("Start with toy-induction: two layers whose heads have known jobs (a previous-token "
                  "head and an induction head)", key="use_toy", on_click=_use_toy)
    if not model.has_head_outputs:
        st.info("The weights of this model's attention cannot be read step by step; pick a BERT-, "
                "GPT-2- or Llama-family model.", icon="ℹ️")
        return
    _pick_known_head(cur)
    row, layer, head = _layer_head(run, keys.TEACH_LAYER, keys.TEACH_HEAD)
    if model.name == TOY:
        table = analysis.head_table(cur.key, run, model)
        r = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
        st.caption(f"toy-induction, layer {layer} head {head}: previous-token score {r.prev_token_score:.2f}, "
                   f"induction score {r.induction_score:.2f}. Layer 0 has a head that looks one token back; "
                   "layer 1 has a head that looks at the token after the previous occurrence of the current "
                   "one, and so predicts the repeat.")
    w = analysis.walkthrough(cur.key, layer, head, model)
    n = (cur.full_run or run).n  # the walkthrough reads every token, hidden or not
    if n > w.n:
        st.caption(f"The steps show the first {w.n} of {n} tokens, so that every cell stays readable.")
    _steps(w)
    _costs(model, run.n, head)
    _demonstrations(cur, w, row)


def _step(number: int, title: str, formula: str, shape: str, figure=None, note: str = "") -> None:
    st.markdown(f"**{number}. {title}** · shape {shape}")
    st.latex(formula)
    if note:
        st.caption(note)
    if figure is not None:
        charts.show(figure, key=f"step_{number}")


def _steps(w: teaching.Walkthrough) -> None:
    n, d, d_k, d_v = w.n, w.X.shape[1], w.Q.shape[1], w.V.shape[1]
    H, tok = w.num_heads, w.tokens
    st.subheader(f"Layer {w.layer}, head {w.head}, with the model's numbers")
    _step(1, "Input X", r"X \in \mathbb{R}^{n \times d_{model}}", f"{n} × {d}",
          teach_figures.matrix(w.X, tok, title="X: one row per token"),
          "What this layer receives: one vector per token (after the layer norm in pre-LN models).")
    kv = f" (KV head {w.kv_head}, shared by {H // w.num_kv_heads} query heads)" if w.num_kv_heads != H else ""
    rope = " Then rotary position embeddings turn q and k by an angle that grows with the position." if w.rope else ""
    _step(2, "Queries, keys, values", r"Q = X W_Q + b_Q,\quad K = X W_K + b_K,\quad V = X W_V + b_V",
          f"Q {n} × {d_k}, K {n} × {d_k}, V {n} × {d_v}; W_Q, W_K {d} × {d_k}, W_V {d} × {d_v}",
          note=f"This head's own projections{kv}.{rope}")
    cols = st.columns(3)
    for col, (name, m) in zip(cols, (("Q", w.Q), ("K", w.K), ("V", w.V))):
        charts.show(teach_figures.matrix(m, tok, title=name), key=f"step_2_{name}", where=col)
    _step(3, "Scores", r"S = Q K^\top", f"{n} × {n}", teach_figures.matrix(w.scores, tok, title="Q Kᵀ", columns=tok),
          "Entry (i, j): how well query i matches key j (a dot product).")
    _step(4, "Scaling", r"S' = \frac{Q K^\top}{\sqrt{d_k}}" + rf"\quad (\sqrt{{{d_k}}} = {1 / w.scale:.3g})",
          f"{n} × {n}", teach_figures.matrix(w.scaled, tok, title="Q Kᵀ / √d_k", columns=tok),
          "Without it, dot products of d_k-dimensional vectors grow like √d_k and softmax saturates.")
    if w.is_causal:
        _step(5, "Causal mask", r"S'_{ij} = -\infty \text{ for } j > i", f"{n} × {n}",
              teach_figures.matrix(w.masked, tok, title="masked scores (blank: −∞)", columns=tok),
              "A decoder's token may not look at later tokens: their scores become −∞, so softmax gives them 0.")
    else:
        _step(5, "Mask", r"\text{(none: an encoder lets every token see every token)}", f"{n} × {n}",
              note="Padding keys would be masked here; a single sentence has none.")
    _step(6, "Softmax, row by row", r"A_{ij} = \frac{e^{S'_{ij}}}{\sum_{k} e^{S'_{ik}}}", f"{n} × {n}",
          teach_figures.matrix(w.probs, tok, title="A: attention probabilities", columns=tok, probabilities=True),
          "Each row is a probability distribution over the keys: it sums to 1.")
    i = st.slider("Query row to look at", 0, n - 1, value=min(n - 1, n // 2), key="teach_row")
    charts.show(teach_figures.softmax_row(w.masked[i], w.probs[i], tok, title=f"Row {i} ({tok[i]!s}): "
                                              "scores → probabilities"), key="teach_softmax_row")
    _step(7, "Weighted sum of values", r"z = A V", f"{n} × {d_v}", teach_figures.matrix(w.z, tok, title="z = A V"),
          "Each token's output is the average of the value vectors, weighted by its row of A.")
    start_col = w.head * d_v
    _step(8, "Concatenate all heads", r"\mathrm{Concat}(z_1, \dots, z_h)", f"{n} × {H * d_v} (h = {H})",
          teach_figures.matrix(w.concat, tok, title="every head's z side by side (this head framed)",
                               highlight=(start_col, start_col + d_v)))
    _step(9, "Output projection", r"\mathrm{MultiHead}(X) = \mathrm{Concat}(z_1, \dots, z_h)\, W_O + b_O",
          f"{n} × {d}; W_O {H * d_v} × {d}",
          teach_figures.matrix(w.output, tok, title="the layer's attention output"),
          f"Head {w.head}'s share is z W_O[{w.head}] (its {d_v} rows of W_O); the output is the sum of "
          "every head's share plus the bias.")


def _costs(model, n: int, head: int) -> None:
    st.subheader("What attention costs")
    rows = []
    for c in teaching.costs(model, n):
        rows.append({"variant": c.name, "KV heads": c.kv_heads,
                     "multiply–adds (one layer)": f"{c.multiply_adds:,}",
                     "of which scores + weighted sum": f"{c.scores + c.weighted_sum:,}",
                     "KV cache floats (one layer)": f"{c.kv:,}",
                     "probabilities stored (unless fused)": f"{c.probabilities:,}",
                     "memory, float32": state.size_text(4 * c.floats)})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="teach_costs")
    st.caption(f"n = m = {n} tokens, d_model = {model.d_model}, h = {model.num_heads}, d_k = d_v = {model.d_k}. "
               "Multiply–adds: projections d_model·(h·n·d_k + G·m·d_k + G·m·d_v), scores h·n·m·d_k, weighted "
               "sum h·n·m·d_v, output h·n·d_v·d_model (spec section 5; the n² terms hold only for self-"
               "attention, m = n). Memory: Q h·n·d_k, K and V G·m·d_k and G·m·d_v, probabilities h·n·m "
               "(fused kernels such as FlashAttention never store them), z h·n·d_v. Sharing K/V (GQA, "
               "MQA) shrinks the K/V projections and the KV cache, not the scores.")
    if 1 < model.num_kv_heads < model.num_heads or model.num_kv_heads == 1:
        charts.show(teach_figures.kv_sharing(model.num_heads, model.num_kv_heads, highlight=head),
                        key="teach_gqa")


def _demonstrations(cur, w: teaching.Walkthrough, row: int) -> None:
    st.subheader("Demonstrations")
    why_proj, why_heads, masks = st.tabs(["Why projections", "Why several heads", "Masks"])
    tok = w.tokens
    with why_proj:
        st.markdown("With **Q = K = V = X** and unit-length token vectors, every token attends most to "
                    "itself: x·x = 1 ≥ x·y. Learned W_Q and W_K let a head look elsewhere.")
        cols = st.columns(2)
        charts.show(teach_figures.matrix(teaching.self_similarity(w.X, True), tok, columns=tok,
                                                  probabilities=True, title="softmax(X̂ X̂ᵀ/√d), no projections"),
                             key="demo_noproj", where=cols[0])
        charts.show(teach_figures.matrix(w.probs, tok, columns=tok, probabilities=True,
                                                  title="this head, with W_Q and W_K"), key="demo_proj", where=cols[1])
        st.markdown("The claim needs **normalised** vectors. With raw vectors a longer neighbour pointing the "
                    "same way wins: below, *b* = (0.6, 0.8) and *c* = 3·*b*, so b·c = 3 > b·b = 1.")
        names, vecs = teaching.longer_neighbour_example()
        cols = st.columns(2)
        charts.show(teach_figures.matrix(teaching.self_similarity(vecs, False), names, columns=names,
                                                  probabilities=True, title="raw vectors: b looks at c"),
                             key="demo_raw", where=cols[0])
        charts.show(teach_figures.matrix(teaching.self_similarity(vecs, True), names, columns=names,
                                                  probabilities=True, title="normalised: b looks at itself (and c, a tie)"),
                             key="demo_norm", where=cols[1])
    with why_heads:
        run = cur.run
        table = analysis.head_table(cur.key, run, cur.model)
        layer_rows = table[table["layer"] == run.layer_ids[row]]
        full = cur.full_run or run  # the walkthrough's positions: every token, whatever the sidebar hides
        mean = full.attentions[row].mean(0)
        st.markdown(f"One head can put each query's attention in one place. Layer {run.layer_ids[row]}'s "
                    f"{run.num_heads} heads split the work; their average (what a single averaged head would "
                    "see) blurs it.")
        charts.show(teach_figures.matrix(mean[: w.n, : w.n], tok, columns=tok, probabilities=True,
                                             title="the layer's heads averaged"), key="demo_mean")
        cols = st.columns(3)
        for h in range(run.num_heads):
            pattern = layer_rows.iloc[h]["pattern"]
            charts.show(teach_figures.matrix(full.attentions[row, h][: w.n, : w.n], tok, columns=tok,
                                                          probabilities=True, title=f"head {h}: {pattern}"),
                                     key=f"demo_head_{h}", where=cols[h % 3])
    with masks:
        unmasked, causal = teaching.softmax_rows(w.scaled), teaching.softmax_rows(w.scaled, causal=True)
        st.markdown("The same scores, softmaxed two ways: an **encoder** (BERT) lets every token see every "
                    "token; a **decoder** (GPT) hides later tokens, so row i spreads over tokens 0…i only.")
        cols = st.columns(2)
        charts.show(teach_figures.matrix(unmasked, tok, columns=tok, probabilities=True,
                                                  title="encoder: bidirectional"), key="demo_enc", where=cols[0])
        charts.show(teach_figures.matrix(causal, tok, columns=tok, probabilities=True,
                                                  title="decoder: causal"), key="demo_dec", where=cols[1])
