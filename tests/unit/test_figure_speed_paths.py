"""The faster paths of the pages' figures carry the same data and labels: a long rollout drawn
as an image decodes back to the matrix, a cached figure is the one a fresh build makes, and the
CSV downloads built on demand hold the numbers shown."""

from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from mha_viz import AttentionRun
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import metrics as metric_figures
from mha_viz.features.across_layers import page as across_layers_page
from mha_viz.features.similarity import page as similarity_page
from mha_viz.ui.kit import charts
from mha_viz.views import detail


def _rollout(n: int, seed: int = 0) -> np.ndarray:
    """Rows of a rollout: a strong diagonal (the residual) over small positive weights."""
    rng = np.random.default_rng(seed)
    m = rng.random((n, n)).astype(np.float32) ** 4 + np.eye(n, dtype=np.float32) * n / 8
    return m / m.sum(-1, keepdims=True)


def _pixels(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_long_rollout_image_decodes_to_the_matrix_with_the_heatmaps_labels():
    n = 300
    m = _rollout(n)
    m[7, 250] = 2 * m.max()  # a single strong cell, found again in the image and in the hover
    tokens = [f"w{i}<i>" for i in range(n)]
    title = "Rollout to layer 5"
    fig = metric_figures.token_figure(m, tokens, title=title)
    small = metric_figures.token_matrix(m[:40, :40], tokens[:40], title=title)  # the heatmap it replaces
    image, hover = fig.data
    assert image.type == "image" and hover.type == "heatmap"
    # every cell is one pixel, coloured on 0..the matrix's maximum as token_matrix colours it
    np.testing.assert_array_equal(_pixels(image.source), head_figures.colorize(m / m.max()))
    assert (hover.zmin, hover.zmax) == (0.0, pytest.approx(float(m.max())))
    top, mean, _ = detail.pooled(m, 128)
    np.testing.assert_array_equal(np.asarray(hover.z), top)
    np.testing.assert_allclose(np.asarray(hover.customdata), mean)
    assert np.asarray(hover.z).max() == pytest.approx(m[7, 250])
    # the same title and axis titles as the heatmap; ticks name the tokens (escaped) by position
    assert fig.layout.title.text.startswith(small.layout.title.text)
    assert fig.layout.xaxis.title.text == small.layout.xaxis.title.text == "input token"
    assert fig.layout.yaxis.title.text == small.layout.yaxis.title.text == "token at this layer"
    assert fig.layout.xaxis.ticktext[1] == f"{fig.layout.xaxis.tickvals[1]}: w{fig.layout.xaxis.tickvals[1]}&lt;i&gt;"
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # queries top to bottom, as the heatmap
    assert "input tokens near" in hover.hovertemplate and "<extra></extra>" in hover.hovertemplate
    assert len(fig.to_json()) < len(metric_figures.token_matrix(m, tokens, title=title).to_json()) / 2


def test_short_rollout_stays_a_heatmap_of_every_cell():
    m = _rollout(20)
    tokens = [f"t{i}" for i in range(20)]
    fig = metric_figures.token_figure(m, tokens, title="Flow to layer 1")
    assert fig.to_json() == metric_figures.token_matrix(m, tokens, title="Flow to layer 1").to_json()


def test_head_image_is_a_matrix_image_with_the_head_views_hover():
    n = 280
    a = _rollout(n, seed=3)
    run = AttentionRun.from_array(a[None, None], [f"t{i}" for i in range(n)])
    fig = head_figures.head_heatmap(run, 0, 0, window=(10, 300))
    image, hover = fig.data
    assert image.x0 == image.y0 == 10 and min(hover.x) >= 10
    assert hover.hovertemplate.startswith("queries near %{y:.0f}, keys near %{x:.0f}")
    assert hover.hovertemplate.endswith("<extra>open a token window for exact cells</extra>")
    assert hover.colorbar.title.text == "weight"
    assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == ("key (attended to)", "query (attending)")
    np.testing.assert_array_equal(_pixels(image.source), head_figures.colorize(a[10:, 10:]))  # 0..1: not rescaled


def test_a_cached_figure_is_built_once_per_key_and_equals_a_fresh_one():
    m = _rollout(30)
    tokens = [f"t{i}" for i in range(30)]
    built = []

    def build():
        built.append(1)
        return metric_figures.token_matrix(m, tokens, title="Rollout to layer 2")

    key = ("test-figure-speed-paths", "rollout", 2)
    first = charts.cached("layers_matrix", key, build)
    again = charts.cached("layers_matrix", key, build)
    other = charts.cached("layers_matrix", key + ("head", 1), build)
    assert first is again and len(built) == 2 and other is not first
    assert first.to_json() == charts.fitted(build()).to_json()  # made once, its margins fitted once (issue 59)


def test_csv_downloads_hold_the_matrix_and_its_labels():
    m = _rollout(6)
    tokens = ["[CLS]", "a,b", "the", "the", "\"q\"", "[SEP]"]
    table = pd.read_csv(io.BytesIO(across_layers_page.token_csv(m, tokens)), index_col=0)
    assert list(table.columns) == [f"{i}:{t}" for i, t in enumerate(tokens)]
    np.testing.assert_allclose(table.to_numpy(), m, rtol=1e-6)
    sim = np.array([[1.0, 0.25], [0.25, 1.0]]) / 3
    labels = metric_figures.head_labels([0], 2)
    sims = pd.read_csv(io.BytesIO(similarity_page.matrix_csv(sim, labels)), index_col=0)
    assert list(sims.columns) == list(sims.index) == ["L0H0", "L0H1"]
    np.testing.assert_allclose(sims.to_numpy(), sim, rtol=1e-5)


def test_a_matrix_past_the_image_limit_is_drawn_max_pooled_over_the_same_positions(monkeypatch):
    monkeypatch.setattr(head_figures, "IMAGE_MAX", 100)
    n = 250
    m = np.full((n, n), 0.01, dtype=np.float32)
    m[137, 42] = 1.0  # one strong cell: its pixel keeps it
    fig = head_figures.matrix_image(m, [f"t{i}" for i in range(n)], title="A head", zmax=1.0)
    image = fig.data[0]
    pixels = _pixels(image.source)
    assert pixels.shape[:2] == (100, 100) and "250 × 250 cells in 100 × 100 pixels" in fig.layout.title.text
    strongest = tuple(head_figures.colorize(np.array([[1.0]]))[0, 0])
    row, col = int(137 * 100 / n), int(42 * 100 / n)
    where = np.argwhere((pixels == strongest).all(-1))  # adaptive pooling's neighbouring bins may share the cell
    assert tuple(pixels[row, col]) == strongest and 1 <= len(where) <= 4 and np.abs(where - (row, col)).max() <= 1
    assert image.dx == pytest.approx(2.5) and image.x0 - image.dx / 2 == pytest.approx(-0.5)  # spans 0 … n − 1
    small = head_figures.matrix_image(m[:80, :80], [f"t{i}" for i in range(80)], title="A head", zmax=1.0)
    assert _pixels(small.data[0].source).shape[:2] == (80, 80) and "80 × 80 pixels" in small.layout.title.text


def test_the_apps_figures_carry_only_the_placeholders_they_use_of_streamlits_template():
    """Once the app's chart module is imported, a new figure is built on `charts.TEMPLATE`: Streamlit's colour way,
    layout colour scales and scatter entry, placeholder for placeholder (what the browser swaps for the theme's
    colours), and nothing else of Streamlit's template (3.7 KB a chart). tests/app/test_app_defaults.py checks that
    no chart of any page leaves its colours to what was dropped."""
    import plotly.graph_objects as go
    import plotly.io as pio

    theirs = pio.templates["streamlit"].to_plotly_json()
    assert pio.templates.default == charts.TEMPLATE
    fig = head_figures.grid_figure(np.full((2, 3, 8, 8), 7, dtype=np.uint8), thumb=8, rescale=False)
    ours = fig.to_plotly_json()["layout"]["template"]
    assert ours["layout"] == {k: theirs["layout"][k] for k in ("colorway", "colorscale")}
    assert ours["data"] == {k: theirs["data"][k] for k in charts.KEPT}
    assert len(go.Figure(layout=dict(template="streamlit")).to_json()) - len(go.Figure().to_json()) > 2000
