"""*Heads behind a prediction*'s figures of one explanation (`mha_viz.interventions.prediction.explain`, `patch`):
the direct logit attribution, the estimated and the real restored fraction on one colour scale, the estimate
against real patching, one layer by position, and one head's tokens and positions. Each takes the explanation and
returns the figure the page draws of it (`mha_viz.figures` shows them); nothing here knows Streamlit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from mha_viz.features.prediction import figures as attribution_figures

if TYPE_CHECKING:
    from mha_viz.interventions.prediction import Explanation


def dla_grid(expl: Explanation) -> go.Figure:
    """Direct logit attribution of a prediction (`mha_viz.interventions.prediction.explain`): what each head's
    write at the last token adds to logit(answer) − logit(wrong), a diverging layers × heads grid."""
    return attribution_figures.dla_grid(expl.dla.per_head, expl.answer_text, expl.wrong_text, expl.clean.layer_ids,
                                        expl.dla.label)


def _differ(expl: Explanation):
    agree = expl.agreement()
    return None if agree is None else agree.differ


def _bound(expl: Explanation) -> float:
    """One colour scale for the estimate's and the real grid, as the page draws them side by side."""
    return attribution_figures.fraction_bound(expl.estimated, None if expl.patching is None else expl.patching.restored)


def estimate_grid(expl: Explanation) -> go.Figure:
    """The estimated restored fraction of each head (attribution patching, `prediction.explain`),
    the heads where it differs from real patching by more than `estimate.DISAGREE` ringed once that
    has run, on one colour scale with `restored_grid`. ValueError when the explanation has no estimate
    (`expl.no_estimate` says why)."""
    if expl.estimate is None:
        raise ValueError(f"this explanation has no estimate: {expl.no_estimate}")
    return attribution_figures.estimate_grid(expl.estimated, expl.clean.layer_ids, _differ(expl), _bound(expl))


def _patched(expl: Explanation) -> None:
    if expl.patching is None:
        raise ValueError("this explanation holds the estimate only: patch it for real first "
                         "(expl = prediction.patch(model, expl, clean, corrupted))")


def restored_grid(expl: Explanation) -> go.Figure:
    """Activation patching of a prediction (`mha_viz.interventions.prediction.patch`): the share of the gap
    between the clean and the corrupted run that patching one head's clean output restores (the
    estimate's colour scale, when there is one: the same colour is the same fraction on both)."""
    _patched(expl)
    return attribution_figures.restored_grid(expl.patching.restored, expl.clean.layer_ids, _differ(expl), _bound(expl))


def estimate_scatter(expl: Explanation) -> go.Figure:
    """The estimate against real patching, one point a head, with both correlations in the title."""
    _patched(expl)
    agree = expl.agreement()
    if agree is None:
        raise ValueError(f"this explanation has no estimate: {expl.no_estimate}")
    return attribution_figures.agreement_scatter(expl.estimated, expl.patching.restored, agree.pearson,
                                                 agree.spearman, expl.clean.layer_ids, agree.differ)


def position_grid(expl: Explanation, layer: int) -> go.Figure:
    """The estimate of one layer (a row of `expl.clean`) by head and patched position, as *Heads behind a
    prediction* draws it under "Where each head reads it"."""
    if expl.estimate is None:
        raise ValueError(f"this explanation has no estimate: {expl.no_estimate}")
    return attribution_figures.position_grid(expl.estimate.values[layer], expl.corrupted.tokens,
                                             expl.clean.layer_ids[layer])


def head_tokens(promoted, suppressed, layer: int, head: int) -> go.Figure:
    """The tokens one head's write promotes and suppresses (`attribution.head_tokens(model, text, layer, head)`),
    as bars."""
    return attribution_figures.token_bars(promoted, suppressed,
                                          f"Layer {layer}, head {head}: tokens its write promotes and suppresses")


def patched_positions(patched, expl: Explanation, layer: int, head: int) -> go.Figure:
    """One head patched at one position at a time (`attribution.patch_positions(…)`, its `.values`), beside
    the estimate of the same from `expl` when it has one."""
    values = getattr(patched, "values", patched)
    return attribution_figures.position_bars(values, expl.corrupted.tokens,
                                             f"Layer {layer}, head {head} patched at one position at a time",
                                             estimate=None if expl.estimate is None else
                                             expl.estimate.values[layer, head])

