"""Room for Plotly's toolbar and titles that wrap (`mha_viz.drawing.style`): every figure keeps a band
at its top for the toolbar, above its title; a long title breaks into lines of at most TITLE_CHARS
shown characters, at its phrases, and never inside an HTML tag. (The e2e tier measures the same in
Chromium: tests/e2e/test_e2e_class_view.py.)"""

from __future__ import annotations

import html
import re

import numpy as np

from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import style
from tests.helpers import random_run


def _shown(line: str) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", line))


def test_a_drawn_figure_has_the_band_above_its_title():
    run, _ = random_run(L=2, H=3, n=9)
    fig = head_figures.head_heatmap(run, 1, 2)
    assert fig.layout.margin.t >= style.TOOLBAR_PX + 20 and fig.layout.title.pad.t == style.TOOLBAR_PX
    grid = head_figures.grid_figure(np.zeros((2, 3, 4, 4), dtype=np.float32))  # labels above: H0, H1, H2
    assert grid.layout.xaxis.side == "top" and grid.layout.margin.t >= style.TOOLBAR_PX + 20


def test_a_long_title_wraps_at_its_phrases_and_keeps_its_words():
    title = "Layer 3, head 1, KV head 0 · value-weighted (‖α f(x)‖, row-normalised)"
    wrapped = style.wrap_title(title)
    assert wrapped == "Layer 3, head 1, KV head 0 · value-weighted<br>(‖α f(x)‖, row-normalised)"
    long = ("Direct logit attribution: logit(&lt;John&gt;) − logit(Mary), <span style=\"color: red; font-weight: "
            "bold\">each head</span> at the last position of the clean text, summed over heads<br>second line")
    lines = style.wrap_title(long).split("<br>")
    assert len(lines) > 3 and lines[-1] == "second line"
    assert all(len(_shown(line)) <= style.TITLE_CHARS for line in lines), [len(_shown(x)) for x in lines]
    assert " ".join(lines).replace("<br>", " ") == long.replace("<br>", " ")  # nothing lost or added
    assert all(line.count("<") == line.count(">") for line in lines)  # no break inside a tag
    assert style.wrap_title("short title") == "short title"
    assert style.wrap_title("x" * 80) == "x" * 80  # one word is never broken
