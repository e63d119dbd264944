"""Plotly's property paths parsed once (`mha_viz.drawing.plotly_paths`): the remembered parse answers as Plotly's own
does, for every kind of path (dots, brackets, underscores, a property whose name holds one, leading, trailing and
doubled underscores), a caller that changes its answer changes nothing kept, and a figure built with it holds what one
built without it holds."""

from __future__ import annotations

import plotly.basedatatypes as plotly_base
import plotly.graph_objects as go

from mha_viz.drawing import plotly_paths

PATHS = ["", "title", "xaxis_title_text", "marker.color", "data[0].marker.line.width", "error_x_thickness",
         "layout.xaxis.rangeslider_visible", "a_path_", "_leading", "double__under", "coloraxis_colorbar_len",
         "updatemenus[1].buttons[0].args"]


def _figure() -> dict:
    fig = go.Figure(go.Heatmap(z=[[0.1, 0.9], [0.5, 0.5]], colorbar_title_text="weight", hovertemplate="%{z}"))
    fig.add_scatter(x=[0, 1], y=[1, 0], error_y_thickness=2, marker_line_width=1)
    fig.update_layout(xaxis_title_text="key", yaxis_autorange="reversed", margin_t=10, title_font_size=13)
    fig.update_xaxes(tickangle=-45)
    return fig.to_dict()


def test_the_remembered_parse_answers_as_plotlys_own(monkeypatch):
    original = plotly_base._str_to_dict_path_full
    original = getattr(original, "original", original)
    monkeypatch.setattr(plotly_base, plotly_paths.NAME, original)
    expected = {p: original(p) for p in PATHS}
    plain = _figure()
    assert plotly_paths.remember() is True
    assert plotly_paths.remember() is False  # once: a second call keeps the first
    parse = plotly_base._str_to_dict_path_full
    for path in PATHS * 2:  # the second time from what it kept
        keys, starts = parse(path)
        assert (keys, list(starts)) == (expected[path][0], list(expected[path][1])), path
    assert parse.cache_info().hits >= len(PATHS)
    parse("xaxis_title_text")[1].append(99)  # a caller that changes its list
    assert parse("xaxis_title_text")[1] == list(expected["xaxis_title_text"][1])
    assert _figure() == plain


def test_the_drawing_package_installs_it():
    import mha_viz.drawing  # noqa: F401 - the import installs it

    assert hasattr(plotly_base._str_to_dict_path_full, "cache_info")
