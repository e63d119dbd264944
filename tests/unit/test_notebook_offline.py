"""Figures in a notebook need no network: after `mha_viz.figures.notebook()` a figure's HTML, as
the notebook shows it, loads no script from outside (no CDN for plotly.js, none for MathJax), in
Jupyter (plotly.js once in the page) and in Colab (plotly.js in every figure). (The HTML report's
own page is checked in test_report.py.)"""

from __future__ import annotations

import re
import sys

import IPython.display
import numpy as np
import plotly.io as pio
import pytest
from plotly.offline import get_plotlyjs

from mha_viz import AttentionRun, figures
from mha_viz.drawing import offline

SCRIPT_SRC = re.compile(r"<script\b[^>]*\bsrc\s*=", re.IGNORECASE)
OUTSIDE = re.compile(r"""\bsrc\s*=\s*["']?\s*(https?:)?//""", re.IGNORECASE)
PLOTLY_JS = get_plotlyjs()[:200]  # the bundle's banner: "plotly.js v…"


@pytest.fixture()
def page(monkeypatch):
    """What `notebook()` puts into the page (the HTML it displays); Plotly's default renderer as it
    was, after the test (ours stays registered: plotly's `del renderers[name]` raises)."""
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    default = pio.renderers.default
    yield shown
    pio.renderers.default = default


@pytest.fixture(scope="module")
def fig():
    a = np.random.default_rng(0).random((2, 2, 4, 4)).astype(np.float32)
    return figures.head(AttentionRun.from_array(a / a.sum(-1, keepdims=True), ["<s>", "a", "b", "c"]), 1, 1)


def _shown(fig) -> str:
    """The HTML a notebook gets for `fig` as a cell's value."""
    return fig._repr_mimebundle_()["text/html"]


def _no_outside_source(html: str) -> None:
    assert not OUTSIDE.search(html), OUTSIDE.search(html)
    assert not SCRIPT_SRC.search(html)  # no script by URL at all: everything inline


def test_in_jupyter_plotly_js_comes_once_from_the_installed_package(page, fig):
    figures.notebook(colab=False)
    assert pio.renderers.default == offline.RENDERER
    assert len(page) == 1 and PLOTLY_JS in page[0]  # the setup cell's output holds plotly.js ...
    _no_outside_source(page[0])
    html = _shown(fig)
    assert PLOTLY_JS not in html and "Plotly.newPlot" in html  # ... and a figure only draws with it
    _no_outside_source(html)


def test_in_colab_every_figure_carries_plotly_js(page, fig, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", object())
    figures.notebook()  # detected: google.colab is imported
    assert page == []  # nothing shared: each output runs in a frame of its own
    html = _shown(fig)
    assert PLOTLY_JS in html and "Plotly.newPlot" in html
    _no_outside_source(html)
