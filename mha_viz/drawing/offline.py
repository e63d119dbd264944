"""Figures in a notebook with no network: Plotly's JavaScript from the installed plotly package,
never from a CDN, in Jupyter, JupyterLab, VS Code and Colab (`notebook`).

Plotly's own "notebook" renderer embeds plotly.js once, but still writes a `<script src=…>` for
MathJax from cdnjs into every figure; its "colab" renderer loads plotly.js from Plotly's CDN. The
renderer here is theirs with both taken out: no MathJax (no figure of mha-viz uses LaTeX).
"""

from __future__ import annotations

import sys

from plotly import io as pio
from plotly.io.base_renderers import HtmlRenderer
from plotly.offline import get_plotlyjs

RENDERER = "mha_viz"  # its name in plotly.io.renderers
NEEDS_IPYTHON = 'mha_viz.figures.notebook() needs IPython: pip install "mha-viz[notebook]"'


class OfflineRenderer(HtmlRenderer):
    """Plotly's HTML renderer without any CDN: each figure a `<div>` and the script that draws it,
    plotly.js in each figure (`include_plotlyjs=True`) or only in the page (`notebook` puts it
    there once)."""

    def __init__(self, *, include_plotlyjs: bool):
        super().__init__(connected=False, full_html=False, global_init=False,
                         include_plotlyjs=include_plotlyjs)

    def to_mimebundle(self, fig_dict) -> dict:
        html = pio.to_html(fig_dict, config=self.config, include_plotlyjs=self.include_plotlyjs,
                           include_mathjax=False, full_html=False, default_width="100%",
                           default_height=525, validate=False)
        return {"text/html": html}


def in_colab() -> bool:
    """Google Colab: every output runs in its own sandboxed frame."""
    return "google.colab" in sys.modules


def page_script() -> str:
    """The HTML that puts the installed plotly.js into a notebook page once (window.Plotly)."""
    return ("<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script>")


def notebook(*, colab: bool | None = None) -> None:
    """Make every Plotly figure a notebook shows render with no network.

    Run it once, at the top of a notebook. It registers a renderer in `plotly.io.renderers` and
    makes it the default (named `RENDERER`), so a figure shown as a cell's last value or by
    `fig.show()` is drawn by the plotly.js of the installed plotly package (about 4.8 MB), never
    a CDN, and with no MathJax (which Plotly's own renderers load from cdnjs):

    - Jupyter Notebook, JupyterLab and VS Code: this cell's output holds plotly.js once, and each
      figure is a `<div>` and the script that draws it with that copy (a few KB plus its data).
      Saved with its outputs, the notebook draws again when opened offline (trusted).
    - Colab (`colab=None` detects it: `google.colab` imported): each output runs in a frame of its
      own that cannot see another's scripts, so each figure carries its own copy of plotly.js.

    Needs IPython (`pip install "mha-viz[notebook]"`).
    """
    try:
        from IPython.display import HTML, display  # only in a notebook: the app never needs IPython
    except ImportError as exc:
        raise ImportError(NEEDS_IPYTHON) from exc
    each = in_colab() if colab is None else colab
    pio.renderers[RENDERER] = OfflineRenderer(include_plotlyjs=each)
    pio.renderers.default = RENDERER
    if not each:
        display(HTML(page_script()))
