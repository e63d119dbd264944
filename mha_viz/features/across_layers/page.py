"""The *Across layers* page: attention rolled out or flowing through the layers, and one head
traced across them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz import InputError, metrics
from mha_viz.budget.seconds import duration
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import style as figure_style
from mha_viz.features.across_layers import controls as across_layers_keys
from mha_viz.features.across_layers.cost import rollout_seconds
from mha_viz.metrics.across_layers import check_rollout
from mha_viz.ui.kit import analysis, charts, cost_prompt, keys, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import view_helpers
from mha_viz.views import detail


def across_layers_page() -> None:
    cur = view_helpers.start("across_layers")
    if cur is None:
        return
    run = cur.run
    if not run.from_first_layer:
        st.info(f"Rollout and flow follow every layer from the first; this capture holds layers "
                f"{', '.join(map(str, run.layer_ids))} of {run.model_layers} only. Capture from layer 0 "
                "(fewer tokens, or layers 0 to k under *Layers to capture* in the sidebar) to see them.",
                icon=":material/info:")
        return
    whole = _whole_rollout_fits(run)
    if whole is None:
        return
    method = st.radio("Method", ["rollout", "rollout through one head", "flow"], key=across_layers_keys.LAYERS_METHOD,
                      persist_state=keys.KEEP,
                      horizontal=True)
    layer = 0
    if run.num_layers > 1:
        session.start_at(across_layers_keys.LAYERS_LAYER, run.num_layers - 1,
                         lambda picked: 0 <= int(picked) < run.num_layers)
        layer = st.slider("Up to layer", 0, run.num_layers - 1, key=across_layers_keys.LAYERS_LAYER)
    if method == "rollout":
        # subscripts as text: TeX-like R_{l−1} showed raw
        st.markdown("**Attention rollout** (Abnar & Zuidema 2020) · Âₗ = ½ · meanₕ Aₗ + ½ · I (rows "
                    "renormalised); R₀ = Â₀, Rₗ = Âₗ Rₗ₋₁ (layers counted from 0, as the slider)")
        st.caption("Row i: how much token i after this layer draws on each input token, heads "
                   "averaged and the residual connection counted. High: the token's representation is "
                   "made of that input token; low: it is not.")
        if whole:
            rolled = _every_layer(cur)
            matrix = None if rolled is None else rolled[layer]
        else:
            matrix = _layer_alone(cur, layer)
        head = None
    elif method == "rollout through one head":
        session.start_at(across_layers_keys.LAYERS_HEAD, 0, lambda h: 0 <= int(h) < run.num_heads)
        head = int(st.number_input("Head", 0, run.num_heads - 1, key=across_layers_keys.LAYERS_HEAD))
        st.markdown("**Per-head rollout** · Aₗ,ₕ Rₗ₋₁")
        st.caption("What head h of this layer reads, traced back to the input tokens through the layers below.")
        if layer == 0:
            below = None
        elif whole:
            rolled = _every_layer(cur)
            below = None if rolled is None else rolled[layer - 1]
        else:
            below = _layer_alone(cur, layer - 1, for_head=True)
        matrix = (None if layer and below is None
                  else analysis.rollout_through_head(cur.key, layer, head, run, below))
    else:
        st.markdown("**Attention flow** (Abnar & Zuidema 2020) · max-flow from (layer, token i) to input "
                    "token j, capacities Â_l; rows normalised")
        if run.n > metrics.FLOW_MAX_TOKENS:
            st.warning(f"Flow solves a max-flow problem for every pair of tokens over L·n² edges (cost "
                       f"grows like n⁴), so it is offered for inputs of at most {metrics.FLOW_MAX_TOKENS} "
                       f"tokens; this one has {run.n}. Rollout works at any length.", icon=":material/timer:")
            return
        # measured on 2 CPU cores: about 5 s for 6 layers at 64 tokens; cost grows like layers · n⁴
        seconds = 5.0 * (layer + 1) / 6 * (run.n / 64) ** 4
        if seconds > 1:
            st.caption(f"This takes about {seconds:.0f} s on 2 CPU cores (a max-flow problem for every "
                       "pair of tokens); the result is kept for this text.")
        matrix = analysis.flow(cur.key, layer, run)
        head = None
    if matrix is None:  # a long computation waiting for its click
        return
    title = metric_figures.ACROSS_LAYERS[method].format(layer=layer, head=head)
    # a long rollout is a few large cells (the first token's column) over a pale rest: it opens brightened
    session.start_at(across_layers_keys.LAYERS_BULK, run.n > detail.FULL_DETAIL_TOKENS)
    bulk = st.toggle("Brighten: colours up to the 99th percentile", key=across_layers_keys.LAYERS_BULK,
                     persist_state=keys.KEEP, help="The largest cells saturate; hover gives every value.")
    top = metric_figures.bulk_top(matrix) if bulk else None
    if bulk:
        st.caption(f"Colours up to {top:.3g}, the 99th percentile; the largest value is {float(matrix.max()):.3g}.")
    fig = charts.cached("layers_matrix", (cur.key, method, layer, head, bulk),
                        lambda: metric_figures.token_figure(matrix, run.tokens, title=title, zmax=top))
    charts.show(fig, key=across_layers_keys.LAYERS_MATRIX)
    name = f"{figure_style.safe_filename(run.model_name)}-{method.replace(' ', '-')}-L{layer}.csv"
    st.download_button("Download this matrix (CSV)", lambda: token_csv(matrix, run.tokens),
                       key=across_layers_keys.DL_LAYERS, on_click="ignore", file_name=name,
                       mime="text/csv")  # the CSV is built on a click only


def _whole_rollout_fits(run) -> bool | None:
    """Whether every layer's rollout fits the capture budget (computed once, kept for every layer: True), or only
    one layer's at a time (three n × n: False); None, with the reason shown, where neither does."""
    try:
        check_rollout(run)
        return True
    except InputError:
        pass
    try:
        check_rollout(run, whole=False)
        return False
    except InputError as exc:
        st.warning(plain(str(exc)), icon=":material/memory:")
        return None


def _every_layer(cur) -> np.ndarray | None:
    """Every layer's rollout, kept for every layer picked after: a long one (SmolLM2 past about 4,700 tokens) says
    what it costs and waits for a click that accepts it (`cost_prompt.accepted`: None until then)."""
    run = cur.run
    said = (f"Rollout multiplies the head mean of each of the {run.num_layers} layers of these {run.n:,} tokens into "
            "the layers below it, once for every layer you pick.")
    seconds = rollout_seconds(run, run.num_layers)
    if not cost_prompt.accepted(("rollout", cur.key), seconds, said, across_layers_keys.LAYERS_START):
        return None
    if seconds >= cost_prompt.SAY_ABOVE_S:  # under the ask, still long to wait for (SmolLM2 at 4,096 tokens: 15 s)
        st.caption(f"{said} About {duration(seconds)} on 2 CPU cores the first time; kept for this text.")
    return analysis.rollout(cur.key, run)


def _layer_alone(cur, layer: int, *, for_head: bool = False) -> np.ndarray | None:
    """R_layer computed alone, every layer's rollout being over the budget (for_head: what a head of layer + 1 reads,
    and its product counted): what it costs said, and a long one waiting for a click that accepts it
    (`cost_prompt.accepted`: None until then)."""
    run = cur.run
    seconds = rollout_seconds(run, layer + 1 + for_head)
    which = (f"the rollout below layer {layer + 1}, which the head reads through," if for_head
             else f"layer {layer}'s")
    said = (f"Every layer's rollout of these {run.n:,} tokens would be over this server's memory for attention, so "
            f"{which} is computed alone, holding three n × n, from the layers below it.")
    if not cost_prompt.accepted(("rollout_layer", cur.key, layer), seconds, said, across_layers_keys.LAYERS_START):
        return None
    st.caption(f"{said} About {duration(seconds)} on 2 CPU cores; kept for this text.")
    return analysis.rollout_layer(cur.key, layer, run)


def token_csv(matrix: np.ndarray, tokens: list[str]) -> bytes:
    cols = [f"{i}:{t}" for i, t in enumerate(tokens)]
    return pd.DataFrame(matrix, index=cols, columns=cols).to_csv().encode()
