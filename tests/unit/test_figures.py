"""Figures: labels are the run's tokens, hover text, colour range, the overview grid."""

from __future__ import annotations

import json

import numpy as np

from mha_viz import AttentionRun
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.drawing import style as figure_style
from tests.helpers import decode_json


def _run(layers=2, heads=3, n=5, tokens=None):
    rng = np.random.default_rng(0)
    a = rng.random((layers, heads, n, n)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    return AttentionRun.from_array(a, tokens or [f"t{i}" for i in range(n)])


def test_head_heatmap_axes_are_the_tokens_even_when_repeated_or_html():
    tokens = ["the", "<b>", "the", "cat", "the"]
    run = _run(tokens=tokens)
    fig = head_figures.head_heatmap(run, 1, 2)
    trace = fig.data[0]
    assert [figure_style.label_text(x) for x in trace.x] == tokens
    assert len(set(trace.x)) == len(tokens)  # repeated tokens stay separate columns
    assert "<b>" not in "".join(trace.x)  # escaped: Plotly would render it as bold
    np.testing.assert_array_equal(np.asarray(trace.z), run.head(1, 2))
    assert "%{y} → %{x}: %{z:.3f}" in trace.hovertemplate
    assert fig.layout.yaxis.autorange == "reversed"  # first query on top


def test_labels_of_many_repeats_stay_short():
    labels = figure_style.axis_labels(["word"] * 1000)
    assert len(set(labels)) == 1000 and max(map(len, labels)) <= len("word") + 1 + 10
    assert {figure_style.label_text(x) for x in labels} == {"word"}


def test_rescale_spans_zero_to_head_max():
    run = _run()
    assert head_figures.head_heatmap(run, 0, 0).data[0].zmax == 1.0
    assert head_figures.head_heatmap(run, 0, 0, rescale=True).data[0].zmax == float(run.head(0, 0).max())


def test_grid_canvas_places_each_head_in_its_tile():
    n, L, H = 6, 3, 4
    a = np.full((L, H, n, n), 1.0 / n, dtype=np.float32)
    a[2, 1] = np.eye(n)  # plant an identity head at layer 2, head 1
    run = AttentionRun.from_array(a, list("abcdef"))
    canvas, t, gap = head_figures.grid_canvas(run, thumb=n, rescale=False)
    tile = canvas[2 * (t + gap):2 * (t + gap) + t, 1 * (t + gap):1 * (t + gap) + t]
    np.testing.assert_array_equal(tile, np.eye(n))
    other = canvas[0:t, 0:t]
    np.testing.assert_allclose(other, 1.0 / n)
    assert np.isnan(canvas[t:t + gap]).all()  # gaps between layers


def test_grid_keeps_a_single_strong_cell_when_downsampled():
    n = 300
    a = np.full((1, 1, n, n), 1.0 / n, dtype=np.float32)
    a[0, 0, 200, :] = 0.0
    a[0, 0, 200, 123] = 1.0
    run = AttentionRun.from_array(a, [str(i) for i in range(n)])
    canvas, t, _ = head_figures.grid_canvas(run, thumb=48, rescale=False)
    assert t == 48 and canvas.max() == 1.0  # max-pooling kept the planted cell


def test_model_grid_is_one_image_and_clicks_map_to_heads():
    run = _run(layers=6, heads=12, n=40)
    fig = head_figures.model_grid(run)
    image, markers = fig.data
    assert image.type == "image" and image.source.startswith("data:image/png;base64,")
    assert len(markers.x) == 6 * 12
    size = len(fig.to_json())
    naive = 72 * 40 * 40 * 4 * 4 / 3  # every weight as base64 float32
    assert size < naive / 3, size  # one palette PNG, even of random noise
    # a click event as Streamlit reports it: the marker's index in the scatter trace
    i = 5 * 12 + 7
    assert tuple(markers.customdata[i]) == (5, 7) and (markers.x[i], markers.y[i]) != (markers.x[0], markers.y[0])
    assert head_figures.grid_pick([{"curve_number": 1, "point_index": i}], 12) == (5, 7)
    assert head_figures.grid_pick([{"curve_number": 0, "point_index": 3}], 12) is None
    assert head_figures.grid_pick([], 12) is None


def test_png_decodes_to_the_quantized_canvas():
    import base64
    import io

    from PIL import Image

    values = np.array([[0.0, 0.5, 1.0], [np.nan, 0.25, 0.75]])
    uri = head_figures.png_data_uri(values)
    img = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB")
    np.testing.assert_array_equal(np.asarray(img), head_figures.colorize(values))


def test_colorize_maps_ends_of_the_scale():
    rgb = head_figures.colorize(np.array([[0.0, 1.0, np.nan]]))
    assert tuple(rgb[0, 0]) == (0xF7, 0xFB, 0xFF) and tuple(rgb[0, 1]) == (0x08, 0x30, 0x6B)
    assert tuple(rgb[0, 2]) == (255, 255, 255)


def test_figures_serialise():
    """What Streamlit sends to the browser (the figure's JSON) decodes back to the run's own
    numbers and tokens: the matrix cell for cell, the labels token for token."""
    tokens = ["the", "<b>", "the", "日本", "café &amp;", "the"]
    run = _run(layers=2, heads=3, n=len(tokens), tokens=tokens)
    spec = decode_json(head_figures.head_heatmap(run, 1, 2).to_json())
    [trace] = spec["data"]
    assert trace["type"] == "heatmap"
    np.testing.assert_array_equal(np.asarray(trace["z"], dtype=np.float32), run.head(1, 2))
    assert [figure_style.label_text(x) for x in trace["x"]] == tokens
    assert trace["y"] == trace["x"] and len(set(trace["x"])) == len(tokens)
    assert spec["layout"]["title"]["text"].startswith("Layer 1, head 2")
    grid = decode_json(head_figures.model_grid(run).to_json())
    assert json.dumps(grid)  # every array decoded to plain JSON values
    assert len(grid["data"][1]["x"]) == 2 * 3  # one clickable point per head


def test_similarity_matrix_lines_part_the_layers_unless_reordered():
    """The matrix cell for cell (float32 on the wire), every head labelled 'L{layer}H{head}',
    a vertical and a horizontal line at each layer boundary in layer order, none when clustered."""
    rng = np.random.default_rng(1)
    layers, heads = [2, 5, 9], 4
    sim = rng.random((12, 12))
    fig = metric_figures.similarity_matrix(sim, layers, heads, title="t")
    trace = fig.data[0]
    np.testing.assert_allclose(np.asarray(trace.z), sim, rtol=1e-6)
    assert np.asarray(trace.z).dtype == np.float32
    assert list(trace.x) == list(trace.y) == [f"L{layer}H{h}" for layer in layers for h in range(heads)]
    shapes = [(s.type, s.x0, s.x1, s.y0, s.y1) for s in fig.layout.shapes]
    assert shapes == [("line", 3.5, 3.5, -0.5, 11.5), ("line", -0.5, 11.5, 3.5, 3.5),
                      ("line", 7.5, 7.5, -0.5, 11.5), ("line", -0.5, 11.5, 7.5, 7.5)]
    order = rng.permutation(12)
    ordered = metric_figures.similarity_matrix(sim, layers, heads, title="t", order=order)
    np.testing.assert_allclose(np.asarray(ordered.data[0].z), sim[np.ix_(order, order)], rtol=1e-6)
    assert list(ordered.data[0].x) == [list(trace.x)[i] for i in order] and not ordered.layout.shapes
    assert not metric_figures.similarity_matrix(sim[:4, :4], [0], heads, title="t").layout.shapes


def test_a_large_similarity_matrix_labels_its_layers_or_every_kth_head():
    """Past LABELLED_HEADS (SmolLM2: 270 heads), Plotly drew no label at all: in layer order each layer is named once,
    at its middle head; clustered, every k-th head keeps its name, at most LABELLED_HEADS of them, evenly spaced."""
    layers, heads = list(range(30)), 9
    sim = np.random.default_rng(2).random((270, 270))
    fig = metric_figures.similarity_matrix(sim, layers, heads, title="t")
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert list(axis.tickvals) == [f"L{layer}H4" for layer in layers]
        assert list(axis.ticktext) == [f"L{layer}" for layer in layers]
    order = np.random.default_rng(3).permutation(270)
    clustered = metric_figures.similarity_matrix(sim, layers, heads, title="t", order=order)
    names = list(clustered.data[0].x)
    ticks = list(clustered.layout.xaxis.tickvals)
    assert len(ticks) <= metric_figures.LABELLED_HEADS and len(ticks) >= 270 // 3
    assert ticks == names[::3] and clustered.layout.xaxis.ticktext is None  # each tick its head's own name
    few = metric_figures.similarity_matrix(sim[:96, :96], list(range(12)), 8, title="t")
    assert list(few.layout.xaxis.tickvals) == list(few.data[0].x)  # every head, up to LABELLED_HEADS


def test_every_similarity_names_its_colour_scale_and_its_alike_end():
    """The matrix's colour bar says what it measures and which end is alike (a divergence is high for unlike
    heads, the reverse of the others), for every kind the page offers."""
    run = AttentionRun(tokens=["a", "b"], attentions=np.full((2, 3, 2, 2), 0.5, np.float32), model_name="m")
    sim = np.eye(6)
    for kind in metric_figures.SIMILARITIES:
        title = metric_figures.similarity_figure(sim, kind, run).data[0].colorbar.title.text
        assert title == metric_figures.SCALE_TITLES[kind] and "high: " in title, (kind, title)
    assert "unlike" in metric_figures.SCALE_TITLES["js"]


def test_a_deep_models_diversity_bars_keep_their_labels_clear():
    """Up to VALUED_BARS layers each bar writes its value; past it (SmolLM2's 30 and all heads) the values, which
    Plotly shrank to a few pixels, are left to hover. The legend sits at the figure's foot, under the turned layer
    labels (at the plot's foot it covered them)."""
    import pandas as pd

    def table(layers):
        names = [f"layer {i}" for i in range(layers)] + ["all heads"]
        return pd.DataFrame({"heads": names, "D": np.linspace(0.1, 0.9, layers + 1),
                             "D_random_init": np.full(layers + 1, 0.5)})
    small, deep = metric_figures.diversity_figure(table(6)), metric_figures.diversity_figure(table(30))
    assert all(bar.texttemplate == "%{y:.3f}" for bar in small.data)
    assert all(bar.texttemplate is None for bar in deep.data) and len(deep.data[0].x) == 31
    for fig in (small, deep):
        legend = fig.layout.legend
        assert (legend.orientation, legend.yref, legend.y, legend.yanchor) == ("h", "container", 0, "bottom")
