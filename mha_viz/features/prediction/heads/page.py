"""*Heads behind a prediction*'s one-head panel: the head the pages share, opened in the page's
explanation (its attention in the clean and corrupted runs, its value-weighted attention, the tokens
its write promotes and suppresses, and patching it one position at a time beside the estimate), each
result computed once for the page's pair and kept (`prediction_keys.PRED_EXTRA`)."""

from __future__ import annotations

import dataclasses
from typing import Hashable

import numpy as np
import streamlit as st

import mha_viz
from mha_viz import needs
from mha_viz.drawing import heads as head_figures
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.prediction import explanation_figures
from mha_viz.features.prediction import figures as attribution_figures
from mha_viz.features.prediction import need as prediction_need
from mha_viz.interventions import attribution, estimate, prediction
from mha_viz.ui.kit import charts, resources, session, shared_head
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button

# --- prediction_grids: *Heads behind a prediction*'s layers × heads grids: direct logit attribution, the estimated
# restored fraction and, once run, real patching, with the scatter of the two. The estimate's grid and the real one
# stand side by side on one colour scale (`mha_viz.figures.estimate_grid`, `restored_grid`), and the caption names
# the top head of each; a click on a grid makes its head the shared one.

def top_head(expl: prediction.Explanation) -> tuple[int, int]:
    """The head a new pair's panel opens on: the largest estimated restored fraction, else the largest
    real one, else the largest direct effect."""
    grid = expl.estimated if expl.estimate is not None else (
        expl.patching.restored if expl.patching is not None else np.abs(expl.dla.per_head))
    return _argmax(grid)


def _argmax(grid: np.ndarray) -> tuple[int, int]:
    at = np.unravel_index(int(np.argmax(grid)), grid.shape)
    return int(at[0]), int(at[1])


def _on_grid(widget: str, layer_ids: list[int], num_heads: int) -> None:
    picked = charts.clicked(widget, lambda points: head_figures.grid_pick(points, num_heads))
    if picked is not None and picked[0] < len(layer_ids):
        shared_head.choose_head_in(layer_ids, *picked)  # the panel below opens it


def _agreement_text(expl: prediction.Explanation, agree) -> str:
    def value(v: float) -> str:
        return f"{v:.3f}" if np.isfinite(v) else "undefined (one side is constant)"
    count = int(agree.differ.sum())
    differ = {0: "No head differs", 1: "1 head differs (ringed on both grids)"}.get(
        count, f"{count} heads differ (ringed on both grids)")
    return (f"Estimate against real patching over the {expl.estimated.size} heads: Pearson r = {value(agree.pearson)}, "
            f"Spearman ρ = {value(agree.spearman)}. {differ} by more than {estimate.DISAGREE} of the gap; the largest "
            f"difference is {agree.largest:.3f}, at layer {expl.clean.layer_ids[agree.where[0]]}, "
            f"head {agree.where[1]}.")


def _grids(expl: prediction.Explanation, agree) -> None:
    """The grids there are and the scatter, two to a row: the estimate beside real patching once
    both exist (one colour scale), direct logit attribution beside the scatter below them."""
    d, ids = expl.dla, expl.clean.layer_ids
    dla = (explanation_figures.dla_grid(expl), prediction_keys.PRED_DLA_GRID, "direct-logit-attribution")
    fractions = []
    if expl.estimate is not None:
        fractions.append((explanation_figures.estimate_grid(expl), prediction_keys.PRED_ESTIMATE_GRID,
                          "estimated-restored-fraction"))
    if expl.patching is not None:
        fractions.append((explanation_figures.restored_grid(expl), prediction_keys.PRED_RESTORED_GRID,
                          "restored-fraction"))
    shown = fractions + [dla] if len(fractions) == 2 else [dla] + fractions
    if agree is not None:
        shown.append((explanation_figures.estimate_scatter(expl), None, "estimate-against-real"))
    for i in range(0, len(shown), 2):
        for (fig, key, name), where in zip(shown[i:i + 2], st.columns(2)):
            if key is None:
                charts.show(fig, key=prediction_keys.PRED_SCATTER, where=where, name=name)
            else:
                charts.show(fig, key=key, where=where, on_select=lambda k=key: _on_grid(k, ids, d.per_head.shape[1]),
                            selection_mode="points", name=name)


def top_heads_text(expl: prediction.Explanation) -> str:
    """The top head of each grid on the page: the estimate's, real patching's (or that it has not
    run) and the largest direct effect, by the model's layer numbers."""
    ids, d = expl.clean.layer_ids, expl.dla

    def named(what: str, at: tuple[int, int], value: str) -> str:
        return f"{what}: layer {ids[at[0]]}, head {at[1]} ({value})"
    parts = []
    est_at = None if expl.estimate is None else _argmax(expl.estimated)
    if est_at is not None:
        parts.append(named("Largest estimated restored fraction", est_at, f"{float(expl.estimated[est_at]):.2f}"))
    if expl.patching is not None:
        at = _argmax(expl.patching.restored)
        real = named("largest patched for real", at, f"{float(expl.patching.restored[at]):.2f}")
        if at == est_at:
            real += ", the same head"
        parts.append(real)
    elif est_at is not None:
        parts.append("real patching has not run yet")
    at = _argmax(np.abs(d.per_head))
    parts.append(named("largest direct effect", at, f"{float(d.per_head[at]):+.2f}"))
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:]


def show_grids(expl: prediction.Explanation) -> None:
    """The agreement of the estimate with real patching (once both exist), the grids and their caption."""
    agree = expl.agreement()
    if agree is not None:
        st.info(_agreement_text(expl, agree), icon=":material/balance:")
    _grids(expl, agree)
    shared = (" The estimate and real patching share one colour scale: a colour is the same fraction on both."
              if expl.estimate is not None and expl.patching is not None else "")
    st.caption(f"Red helps the answer, blue the wrong token; 0 is white.{shared} {expl.dla.label}: what each head's "
               "write at the last token adds to the logit difference. Restored fraction: the share of the gap between "
               "the runs that the corrupted run regains when this one head's output is the clean run's. "
               f"{top_heads_text(expl)} Click a cell to open that head below.")


def _extra(model, key: Hashable, what: str, layer: int, head: int, compute):
    """A result of the one-head panel, kept for this pair (each costs a forward)."""
    store = session.setdefault(prediction_keys.PRED_EXTRA, {})
    k = (key, layer, head, what)
    if k not in store:
        def held():
            with resources.slots().hold(need=prediction_need.patching(model, needs.tokens(model, key.clean, key.cap))):
                return compute()
        result, error = resources.attempt(held, what="This head's panel", out_of_memory=(
            "This head's panel ran out of memory: use shorter texts or a smaller model."))
        if error:
            raise mha_viz.InputError(error)
        store[k] = result
    return store[k]


def one_head(cur, key: Hashable, expl: prediction.Explanation) -> None:
    """The panel of the shared head (`shared_head`) in the explanation `expl` of `key` (the page's
    PredKey): its attention in both runs, its value-weighted attention, the tokens it promotes and
    suppresses, and real patching of it position by position beside the estimate."""
    model, run = cur.model, expl.clean
    st.subheader("One head")
    cols = st.columns([1, 1, 3])
    layer, head = shared_head.pick_head(run.layer_ids, run.num_heads, prediction_keys.PRED_LAYER,
                                        prediction_keys.PRED_HEAD, where=cols[:2])
    notebook_button.record(layer=layer, head=head, corrupted=key.corrupted, answer=key.answer, wrong=key.wrong,
                           patched=expl.patching is not None,
                           position_layer=session.get(prediction_keys.PRED_POS_LAYER))
    parts = [f"{expl.dla.label} {float(expl.dla.per_head[layer, head]):+.3f}"]
    if expl.estimate is not None:
        parts.append(f"estimated restored fraction {float(expl.estimated[layer, head]):.3f}")
    if expl.patching is not None:
        parts.append(f"patched for real {float(expl.patching.restored[layer, head]):.3f}")
    cols[2].caption("; ".join(parts) + ".")
    left, right = st.columns(2)
    charts.show(head_figures.head_heatmap(expl.clean, layer, head), key=prediction_keys.PRED_CLEAN_HEAD, where=left,
                name="clean-attention")
    charts.show(head_figures.head_heatmap(expl.corrupted, layer, head), key=prediction_keys.PRED_CORRUPTED_HEAD,
                where=right, name="corrupted-attention")
    left.caption("Clean run.")
    right.caption("Corrupted run.")
    st.caption("Below: the clean run's value-weighted attention (what each key moves through this head, each row "
               "normalised), and the tokens this head's write at the last position promotes and suppresses through "
               "the final norm and the unembedding (a logit lens of the write).")
    left, right = st.columns(2)
    if expl.clean.value_norms is not None:
        run = expl.clean  # weighted one layer only: the panel draws one head
        row = dataclasses.replace(run, attentions=run.attentions[layer:layer + 1], head_outputs=None,
                                  value_norms=run.value_norms[layer:layer + 1], layer_ids=[run.layer_ids[layer]])
        charts.show(head_figures.head_heatmap(attribution.as_contributions(row), 0, head),
                    key=prediction_keys.PRED_WEIGHTED_HEAD, where=left, name="clean-value-weighted")
    else:
        left.info(f"The value path of {plain(model.name)} cannot be read: no value-weighted attention.")
    answer, wrong = expl.dla.target, expl.dla.wrong
    try:
        promoted, suppressed = _extra(model, key, "tokens", layer, head, lambda: attribution.head_tokens(
            model, key.clean, layer, head, k=8, max_tokens=key.cap))
        charts.show(attribution_figures.token_bars(promoted, suppressed, f"Layer {layer}, head {head}: tokens its "
                                                   "write promotes and suppresses"),
                    key=prediction_keys.PRED_TOKENS, where=right, name="head-tokens")
        by_pos = _extra(model, key, "positions", layer, head, lambda: attribution.patch_positions(
            model, key.clean, key.corrupted, layer, head, answer, wrong, max_tokens=key.cap))
    except mha_viz.InputError as exc:
        st.warning(plain(str(exc)), icon=":material/warning:")
        return
    charts.show(attribution_figures.position_bars(by_pos.values, expl.corrupted.tokens,
                                                  f"Layer {layer}, head {head} patched at one position at a time",
                                                  estimate=None if expl.estimate is None else
                                                  expl.estimate.values[layer, head]),
                key=prediction_keys.PRED_POSITIONS, name="restored-by-position")
    st.caption("Each filled bar: the corrupted run with this head's clean output at that position only, patched for "
               "real; each outlined bar: the estimate of the same. The positions where the texts differ, and the last "
               "one (where the answer is read), usually carry it.")
