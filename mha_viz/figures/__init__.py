"""Every figure of mha-viz as a `plotly.graph_objects.Figure`, the public face over where they are drawn:
each feature's own figures in its folder (`mha_viz/features/<id>/figures.py`: the line view, comparison,
generation, teaching, attribution, …), named by its record (`catalogue.Feature.figures`) and gathered here from the
records, and what several share (`KERNEL`: the head maps and grids, per-head grids, one token in every head, a
score's terms, the pruning curve), drawn here and in `mha_viz.drawing`. The app's pages and
notebooks call the same functions; nothing here knows Streamlit.

The functions below are the public surface: each takes what `mha_viz` computes (a run, a
comparison, a generation, an explanation) and returns the figure the app's page draws of it::

    import mha_viz
    from mha_viz import figures

    figures.notebook()                      # once: plotly.js from the installed package, no CDN
    model = mha_viz.load_model("minilm")
    run = mha_viz.analyze(model, "The cat sat on the mat.")
    figures.head(run, 2, 3)                 # layer 2, head 3
    figures.model_grid(run)
    figures.lines(run, 2, heads=[3])
    figures.metric_grid(run, "entropy")

`layer` is always a row of the run: the model's layer number is `run.layer_ids[layer]` (the same
unless the run holds some layers only), and every figure labels rows by it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pandas as pd
import plotly.graph_objects as go

from mha_viz import catalogue
from mha_viz import metrics as head_metrics
from mha_viz.drawing import chat_roles as role_figures
from mha_viz.drawing import focus as focus_figures
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import scatter as scatter_figures
from mha_viz.drawing import why as why_figures
from mha_viz.drawing.offline import notebook as notebook  # a public name of the face
from mha_viz.drawing.pruning import pruning_curve as pruning_curve  # a public name of the face
from mha_viz.views import focus as focus_arrays

if TYPE_CHECKING:
    from mha_viz.capture.run import AttentionRun
    from mha_viz.metrics import Weights

# the figures of what several features share, drawn here and in `mha_viz.drawing`; each feature's own are its record's
KERNEL = ["head", "model_grid", "token_focus", "metric_grid", "head_scatter", "similarity", "head_map", "rollout",
          "grid", "pruning_curve", "score_terms", "score_parts", "role_map", "notebook"]

DIRECTIONS = {"to": focus_arrays.TO, "by": focus_arrays.BY}  # token_focus's short names


def head(run: AttentionRun, layer: int = 0, head: int = 0, *, level: str | None = None, rescale: bool = False,
         window: tuple[int, int] | None = None, chat=None) -> go.Figure:
    """One head's attention as the head view draws it: queries down, keys across, each row summing to 1.

    level: "tokens" (every token; `window=(start, stop)` keeps tokens start..stop-1 on both axes),
    "blocks" (the whole matrix max-pooled to at most 128 × 128 blocks, hover giving max and mean)
    or "words" (word pieces merged); by default every token up to 256 tokens, blocks beyond.
    rescale: colours span 0..this head's maximum instead of 0..1. chat: the chat the run's text renders
    (`mha_viz.text.chat.roles`): each token's role along both axes, at every level.
    """
    return head_figures.head_figure(run, layer, head, level=level, rescale=rescale, window=window,
                                    roles=None if chat is None else chat.aligned(run))


def model_grid(run: AttentionRun, *, rescale: bool = True) -> go.Figure:
    """Every head at once, as the model view draws it: a layers × heads grid of thumbnails (each
    head max-pooled to 48 × 48), sent as one image. rescale: each thumbnail to its own maximum."""
    return head_figures.model_grid(run, rescale=rescale)


def token_focus(run: AttentionRun, index: int, *, direction: str = "to", words: bool = False,
                rescale: bool = False) -> go.Figure:
    """One token in every head, as the token focus page draws it: a row per head (layer by layer)
    of what the token at position `index` attends to (direction="to") or of what attends to it
    ("by"). words: `index` is a word, pieces merged as in the head view's words level."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r}: choose 'to' or 'by'")
    f = focus_arrays.focus(run, index, words=words)
    return focus_figures.focus_grid(f, DIRECTIONS[direction], run.layer_ids, rescale=rescale)


def metric_grid(run: AttentionRun, metric: str = "entropy", *, table: pd.DataFrame | None = None,
                weights: Weights | None = None) -> go.Figure:
    """A head metric as a layers × heads grid, hover naming each head's pattern class, as the head
    metrics page draws it. metric: a column of `mha_viz.metrics.head_table(run)` listed in
    `mha_viz.metrics.METRICS` (entropy, confidence, prev_token_score, induction_score, …).
    table: that table when it is computed already; weights: `model.head_weights()`, for the
    output-norm columns."""
    table = head_metrics.head_table(run, weights) if table is None else table
    return metric_figures.table_grid(table, metric, run)


def head_scatter(run: AttentionRun | pd.DataFrame, x: str = scatter_figures.DEFAULT_X,
                 y: str = scatter_figures.DEFAULT_Y, colour: str = scatter_figures.LAYER, *,
                 weights: Weights | None = None) -> go.Figure:
    """Every head on two measures, as the head metrics and corpus pages draw it: `x` and `y` columns of
    `mha_viz.metrics.METRICS`, coloured by a third measure, "layer" or "pattern" (the class). run: a run
    (its `head_table`, weights as `metric_grid`'s) or a table already computed, one row per head (a run's
    head table, a corpus' `CorpusStats.table`). One point a head, layer-major: the point index of a click
    or a lasso is the table's row (`mha_viz.drawing.scatter.picked_heads`)."""
    table = run if isinstance(run, pd.DataFrame) else head_metrics.head_table(run, weights)
    return scatter_figures.measure_scatter(table, x, y, colour)


def role_map(table: pd.DataFrame) -> go.Figure:
    """A chat's heads while the model answers, as Head metrics draws it: every head of a `mha_viz.metrics.role_mass`
    table as a point, its share of the assistant's attention on the system's words (x) against the user's (y),
    coloured by layer; one point a head, layer-major (a click's point index is the table's row)."""
    return role_figures.role_map(table)


def similarity(run: AttentionRun, kind: str = "js", *, weights: Weights | None = None,
               clustered: bool = False) -> go.Figure:
    """Every pair of heads compared (`mha_viz.metrics.head_similarity(run, kind)`), as the head
    similarity page draws it: in layer order with lines between layers, or clustered (alike
    heads side by side). kind: a key of `mha_viz.metrics.SIMILARITIES` ("js", "cosine", "cka",
    …; "qk", "ov" and "residual" need weights=`model.head_weights()`)."""
    sim = head_metrics.head_similarity(run, kind, weights=weights)
    order = head_metrics.cluster_order(head_metrics.as_dissimilarity(sim, kind)) if clustered else None
    return metric_figures.similarity_figure(sim, kind, run, order=order)


def head_map(run: AttentionRun, kind: str = "js", *, weights: Weights | None = None, color_by: str = "layer",
             table: pd.DataFrame | None = None) -> go.Figure:
    """The map of heads: every head a point placed by metric MDS of the `kind` dissimilarity
    (as `similarity`), so heads close together behave alike; coloured by "layer" or by "pattern"
    class (from `table`, `mha_viz.metrics.head_table(run)`, computed when not given)."""
    sim = head_metrics.head_similarity(run, kind, weights=weights)
    xy = head_metrics.mds(head_metrics.as_dissimilarity(sim, kind))
    table = head_metrics.head_table(run, weights) if table is None else table
    return metric_figures.map_figure(xy, kind, run, patterns=table["pattern"].tolist(), color_by=color_by)


def rollout(run: AttentionRun, layer: int = -1, *, head: int | None = None) -> go.Figure:
    """Attention rollout (Abnar & Zuidema 2020) up to `layer` (default the last): row i, how much
    token i after that layer draws on each input token, heads averaged and the residual counted.
    head: rolled out through that one head of `layer` instead (A_{l,h} R_{l−1}). Needs a run
    captured from the first layer."""
    layer = range(run.num_layers)[layer]
    if head is None:  # that layer's alone: three n × n held, whatever the number of layers
        matrix, method = head_metrics.rollout_layer(run, layer), "rollout"
    else:
        matrix = head_metrics.rollout_through_head(run, layer, head)
        method = "rollout through one head"
    title = metric_figures.ACROSS_LAYERS[method].format(layer=layer, head=head)
    return metric_figures.token_figure(matrix, run.tokens, title=title)


def grid(values, *, title: str, layer_ids: list[int] | None = None) -> go.Figure:
    """Any (layers, heads) array as a layers × heads grid, as the app draws head importance, the attention
    hidden tokens took (`run.hidden.mass`), how much contributions changed each head and learned sinks.
    layer_ids: the model's layer number of each row (a run's `layer_ids`; default 0, 1, …)."""
    return metric_figures.metric_grid(values, title=title, layer_ids=layer_ids)


def score_terms(t, k: int = 15) -> go.Figure:
    """One attention score split into what wrote the query × what wrote the key (`mha_viz.circuits.qk_terms`, or a
    whole head's `mha_viz.circuits.qk_pattern_terms`), as the Head view's *Why here?* draws it: the k largest parts
    a side and "other", the cells summing to the score."""
    return why_figures.terms_heatmap(t, k)


def score_parts(t, k: int = 15) -> go.Figure:
    """Each part's share of a split score (`mha_viz.circuits.qk_terms`): the query side's row sums and the key side's
    column sums, the k largest of each, as *Why here?* draws them beside `score_terms`."""
    return why_figures.terms_bars(t, k)


def features_figures() -> dict[str, Callable]:
    """Every feature's public figures by name (`catalogue.Feature.figures`), in the navigation's order; a name
    given twice, or one the kernel's figures hold, is refused."""
    found: dict[str, Callable] = {}
    for feature in catalogue.features():
        for fn in feature.figures:
            if fn.__name__ in found or fn.__name__ in KERNEL:
                raise ValueError(f"the figure {fn.__name__!r} of the feature {feature.id!r} is named twice")
            found[fn.__name__] = fn
    return found


globals().update(features_figures())  # the face is made from the records: no module here names a feature
__all__ = KERNEL + sorted(features_figures())
