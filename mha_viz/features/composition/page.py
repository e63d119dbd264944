"""The *Head composition* page: how heads compose, read off the weights (Elhage et al. 2021): the Q-, K- and
V-composition scores of every earlier head into every later head beside a random baseline, a click opening
both heads side by side, and each head's copying score."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_viz.circuits import composition as compose
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.export import shared_controls
from mha_viz.features.composition import controls as composition_keys
from mha_viz.features.composition import figures as composition_figures
from mha_viz.ui.kit import analysis, charts, keys, resources, session, shared_head
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import view_helpers

KINDS = {"q": "Q: into its queries", "k": "K: into its keys", "v": "V: into its values"}
EXPLAIN = {
    "q": "The earlier head's output (W_V W_O) read by the later head's queries (W_Q W_Kᵀ): ‖W_OV¹ W_QK²‖_F / "
         "(‖W_OV¹‖_F ‖W_QK²‖_F).",
    "k": "The earlier head's output read by the later head's keys: ‖W_OV¹ W_QK²ᵀ‖_F / (‖W_OV¹‖_F ‖W_QK²‖_F). An "
         "induction head reads a previous-token head this way.",
    "v": "The earlier head's output read by the later head's values: ‖W_OV¹ W_OV²‖_F / (‖W_OV¹‖_F ‖W_OV²‖_F).",
}


def _captured() -> list[int]:
    """The model layers the sidebar's run holds (Compare heads and the Head view show those only)."""
    run = getattr(session.get(keys.CURRENT), "run", None)
    return [] if run is None else [int(layer) for layer in run.layer_ids]


def _on_pair(layer_ids: list[int], num_heads: int) -> None:
    """A click on a cell: both heads side by side on *Compare heads* (when the run holds both layers)."""
    labels = metric_figures.head_labels(layer_ids, num_heads)
    picked = charts.clicked(composition_keys.COMP_MATRIX, lambda points: composition_figures.pair_pick(points, labels))
    if picked is None or any(layer_ids[p // num_heads] not in _captured() for p in picked):
        return
    session.put(shared_controls.COMPARE_HEADS, [labels[picked[0]], labels[picked[1]]])
    session.put(keys.GOTO, "compare_heads")


AUTO_S = 20.0  # computed on arrival when it takes less than this


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def _attempt(compute, what: str, say):
    """compute()'s result, or None after `say` (st.warning, st.info) gave the message."""
    result, error = resources.attempt(compute, what=what, out_of_memory=f"{what} ran out of memory.")
    if error:
        say(plain(error), icon=":material/warning:" if say is st.warning else ":material/info:")
    return result


def composition_page() -> None:
    cur = view_helpers.start("composition")
    if cur is None:
        return
    model = cur.model
    if model is None or cur.model_key is None:
        st.info("Load a model to see how its heads compose.", icon=":material/info:")
        return
    st.caption("Read off the weights alone, not the text: how much each head's output can feed each later head, "
               "with every norm's weight folded into the matrices that read it. Each score is a cosine-like ratio "
               "in 0..1; the random baseline is the mean score of Gaussian matrices of the same shapes.")
    seconds = compose.composition_seconds(model)
    if seconds > AUTO_S and not compose.composition_known(model) and not st.button(
            f"Compute the composition scores (about {_duration(seconds)} here)", key=composition_keys.COMP_GO):
        st.info(f"{plain(model.name)} has {model.num_layers} layers of {model.num_heads} heads: every pair of heads "
                f"costs a d_v × d_model × d_k product, about {_duration(seconds)} on this machine "
                f"({'its GPU' if compose.on_gpu(model) else 'the CPU'}). The result is kept for the model.",
                icon=":material/timer:")
        return
    result = _attempt(lambda: analysis.composition(cur.model_key, model), "Head composition", st.warning)
    if result is None:
        return
    scores, baseline = result
    L, H = scores["q"].shape[:2]
    layer_ids = list(range(L))
    cols = st.columns([3, 3])
    kind = cols[0].radio("Composition", list(KINDS), key=composition_keys.COMP_KIND, persist_state=keys.KEEP,
                         horizontal=True, format_func=KINDS.get)
    session.setdefault(composition_keys.COMP_ABOVE, 2.0)
    above = cols[1].slider("Show scores above this many × the random baseline", 0.0, 5.0, step=0.25,
                           key=composition_keys.COMP_ABOVE, persist_state=keys.KEEP)
    click = ("Click a cell to open both heads side by side." if composition_figures.clickable(
        scores[kind], baseline[kind], above) else f"Over {composition_figures.MARKERS:,} cells are shown: raise the "
        "threshold to click one (or read the table below).")
    missing = sorted(set(layer_ids) - set(_captured()))
    if missing:
        click += (" The sidebar's run holds only some layers: a click opens heads of those layers only (*Capture "
                  "layers*).")
    st.caption(EXPLAIN[kind] + " " + click)
    fig = charts.cached("composition", (cur.model_key, kind, above), lambda: composition_figures.composition_figure(
        scores[kind], kind, baseline=baseline[kind], above=above, layer_ids=layer_ids))
    charts.show(fig, key=composition_keys.COMP_MATRIX, name=f"{kind}-composition", selection_mode="points",
                on_select=lambda: _on_pair(layer_ids, H))
    if model.name == "toy-induction":
        st.info("On toy-induction, K-composition shows the induction circuit in the weights: every layer-1 head's "
                "keys read the layer-0 previous-token head (its row stands out), and the layer-1 heads' copying "
                "scores are near 1: they copy the token they find into the prediction.", icon=":material/school:")
    st.subheader("The strongest")
    st.dataframe(composition_figures.strongest(scores[kind], baseline[kind], layer_ids=layer_ids, above=above),
                 hide_index=True, key=composition_keys.COMP_TABLE)
    st.subheader("Copying")
    st.caption("Σλ / Σ|λ| over the eigenvalues λ of each head's full OV circuit W_E W_V W_O W_U: near 1 when what a "
               "head moves raises the logit of the same token (a copying head), near 0 for a random head, negative "
               "when it lowers it. Click a head to open it.")
    copying = _attempt(lambda: analysis.copying(cur.model_key, model), "Copying scores", st.info)
    if copying is None:
        return
    charts.show(metric_figures.metric_grid(np.asarray(copying), title="Copying score of each head", diverging=True,
                                           layer_ids=layer_ids),
                key=composition_keys.COMP_COPYING, name="copying", selection_mode="points",
                on_select=lambda: _on_head(layer_ids, H))


def _on_head(layer_ids: list[int], num_heads: int) -> None:
    """A click on the copying grid (every layer of the model): that head in the Head view."""
    picked = charts.clicked(composition_keys.COMP_COPYING, lambda points: head_figures.grid_pick(points, num_heads))
    if picked is not None and picked[0] < len(layer_ids) and layer_ids[picked[0]] in _captured():
        shared_head.choose_head_in(layer_ids, *picked)
        session.put(keys.GOTO, "head_view")
