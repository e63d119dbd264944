"""The figure of a method run over a task (`mha_viz.tasks`: patching, the estimate or direct logit attribution over a
set of prompt pairs): every head's mean over the pairs as a layers × heads grid on a diverging scale, its bootstrap
interval and sign-flip p-value on hover, and a cross on each head whose interval holds 0 (its effect is not told
apart from none)."""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

from mha_viz.drawing.metrics import metric_grid

MARK = "interval holds 0"


def task_grid(result, title: str | None = None, layer_ids: list[int] | None = None) -> go.Figure:
    """A method over a task (`mha_viz.patch_heads`, `estimate_heads` or `direct_logit` given a `PromptSet`; a
    `TaskPatching` or `TaskDirectLogit`: mean, low, high, p_value, crosses_zero, level): every head's mean over the
    pairs, its interval and p-value on hover, a cross where the interval holds 0; a click on a cell opens that head,
    as on every grid. title: default names the method and the pairs' source. layer_ids: the model's layer number of
    each row (`model.layer_ids`; default 0, 1, …)."""
    if title is None:
        what = ("Direct logit attribution (logits)" if not hasattr(result, "mode") else
                f"{'Restored fraction' if result.mode == 'denoise' else 'Damage'} ({result.metric})")
        title = f"{what}, mean over {result.source}"
    mean, low, high, p = (np.asarray(getattr(result, a), dtype=np.float64) for a in ("mean", "low", "high", "p_value"))
    level = f"{100 * result.level:g} %"
    hover = np.array([[f"<br>mean over {len(result.kept)} pairs; {level} interval [{lo:+.3g}, {hi:+.3g}], "
                       f"p = {pv:.3g}" + (f" ({MARK})" if lo <= 0 <= hi else "")
                       for lo, hi, pv in zip(*rows)] for rows in zip(low, high, p)])
    fig = metric_grid(mean, diverging=True, layer_ids=layer_ids, patterns=hover,
                      title=html.escape(title, quote=False))
    layers, heads = np.nonzero(np.asarray(result.crosses_zero))
    if layers.size:  # after the click markers, so that a click still opens the head under it
        fig.add_trace(go.Scatter(x=heads, y=layers, mode="markers", name=MARK, hoverinfo="skip", showlegend=False,
                                 marker=dict(symbol="x-thin", size=9, color="rgba(60,60,60,0.8)",
                                             line=dict(width=1.5, color="rgba(60,60,60,0.8)"))))
    return fig
