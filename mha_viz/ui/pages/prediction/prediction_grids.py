"""*Heads behind a prediction*'s layers × heads grids: direct logit attribution, the estimated
restored fraction and, once run, real patching, with the scatter of the two. The estimate's grid
and the real one stand side by side on one colour scale (`mha_viz.figures.estimate_grid`, `restored_grid`),
and the caption names the top head of each; a click on a grid makes its head the shared one."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_viz import figures
from mha_viz.drawing import heads as head_figures
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.interventions import estimate, prediction
from mha_viz.ui.kit import charts, shared_head


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
    dla = (figures.dla_grid(expl), prediction_keys.PRED_DLA_GRID, "direct-logit-attribution")
    fractions = []
    if expl.estimate is not None:
        fractions.append((figures.estimate_grid(expl), prediction_keys.PRED_ESTIMATE_GRID,
                          "estimated-restored-fraction"))
    if expl.patching is not None:
        fractions.append((figures.restored_grid(expl), prediction_keys.PRED_RESTORED_GRID, "restored-fraction"))
    shown = fractions + [dla] if len(fractions) == 2 else [dla] + fractions
    if agree is not None:
        shown.append((figures.estimate_scatter(expl), None, "estimate-against-real"))
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
