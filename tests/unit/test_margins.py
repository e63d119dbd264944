"""Margins set before the browser draws (`mha_viz.drawing.margins`, issue 59): each side holds what its labels,
titles, colour bars and legend take, by the sizes the module states, computed here by hand; a margin never shrinks;
fitting twice changes nothing; and the app fits every chart it shows once (a cached one:
tests/unit/test_figure_speed_paths.py)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from mha_viz.drawing import margins as m
from mha_viz.drawing.style import axis_labels, margin, plot_title


def _heatmap(ys, xs=("a", "b"), **layout) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=np.zeros((len(ys), len(xs))), x=list(xs), y=list(ys), showscale=False))
    return fig.update_layout(margin=dict(l=10, r=10, t=10, b=10), **layout)


def test_the_left_margin_holds_the_longest_y_label_and_the_title():
    label = "w" * 20  # 20 characters of 12 px, 0.56 of a size each
    room = m.room(_heatmap(["a", label]))
    assert room["l"] == math.ceil(m.LABEL_GAP_PX + 20 * 0.56 * 12 + m.BARE_EDGE_PX + m.SLACK_PX)  # 166
    titled = m.room(_heatmap(["a", label], yaxis=dict(title=dict(text="query"))))
    assert titled["l"] == math.ceil(m.LABEL_GAP_PX + 20 * 0.56 * 12 + m.TITLE_ROOM_PX + m.SLACK_PX)
    two_lines = m.room(_heatmap(["a", label], yaxis=dict(title=dict(text="query<br>(attending)"))))
    assert two_lines["l"] == titled["l"] + 19


def test_wide_characters_and_a_repeated_tokens_suffix_count_as_shown():
    assert m.text_px("语言") == pytest.approx(2 * 12)  # a CJK character: a whole size
    tokens = axis_labels(["cat", "cat", "cat"])  # the repeats carry invisible suffixes
    assert m.widest(tokens) == pytest.approx(m.text_px("cat")) == pytest.approx(3 * 0.56 * 12)
    assert m.text_px("<b>a&amp;b</b>") == pytest.approx(3 * 0.56 * 12)  # tags dropped, the entity one character


def test_turned_x_labels_take_their_height_under_the_plot():
    label = "m" * 10
    level = m.room(_heatmap(["a"], xs=["a", label]))
    turned = m.room(_heatmap(["a"], xs=["a", label], xaxis=dict(tickangle=-90)))
    width = 10 * 0.56 * 12
    assert level["b"] == math.ceil(m.LABEL_GAP_PX + m.LABEL_LINE_PX + m.BARE_EDGE_PX + m.SLACK_PX)
    assert turned["b"] == math.ceil(m.LABEL_GAP_PX + width + m.BARE_EDGE_PX + m.SLACK_PX)
    sixty = m.room(_heatmap(["a"], xs=["a", label], xaxis=dict(tickangle=-60)))
    assert sixty["b"] == math.ceil(m.LABEL_GAP_PX + width * math.sin(math.radians(60))
                                   + m.LABEL_LINE_PX * 0.5 + m.BARE_EDGE_PX + m.SLACK_PX)


def test_a_turned_first_label_runs_past_the_left_edge_and_a_turned_last_past_the_right():
    """Issue 90: *patched at one position at a time* cut its first labels ("When" drawn as "hen"): a label turned by
    −60° ends at its tick and runs down to the left by its width × cos 60°, beyond a short y label's margin."""
    first = "When Mary and"
    left = m.room(_heatmap(["a"], xs=[first, "b"], xaxis=dict(tickangle=-60)))
    reach = 13 * 0.56 * 12 * math.cos(math.radians(60)) + m.BARE_EDGE_PX
    assert left["l"] == math.ceil(reach + m.SLACK_PX)  # the y label "a" alone would take 15 + 7 + 10 px
    right = m.room(_heatmap(["a"], xs=["b", first], xaxis=dict(tickangle=60)))
    assert right["r"] == math.ceil(reach + m.SLACK_PX) and right["l"] < left["l"]
    for upright in (-90, 0, None):
        assert m.room(_heatmap(["a"], xs=[first, "b"], xaxis=dict(tickangle=upright)))["l"] < reach


def test_each_subplots_axes_take_the_room_of_their_own_traces_labels():
    """Two plots side by side (xaxis and xaxis2, yaxis and yaxis2 on the right): each axis reads the labels of the
    traces drawn on it, so the bottom margin holds the taller of the two x axes' turned labels, the left one the
    first plot's y labels and the right one the second's; an axis no trace names reads none."""
    fig = go.Figure([go.Heatmap(z=[[0.0, 1.0]], x=["a", "b"], y=["w" * 4], showscale=False),
                     go.Heatmap(z=[[0.0, 1.0]], x=["m" * 10, "b"], y=["w" * 12], xaxis="x2", yaxis="y2",
                                showscale=False)],
                    layout=dict(margin=dict(l=10, r=10, t=10, b=10), xaxis=dict(domain=[0, 0.45]),
                                xaxis2=dict(domain=[0.55, 1], tickangle=-90),
                                yaxis2=dict(anchor="x2", side="right"), yaxis3=dict(overlaying="y")))
    room = m.room(fig)
    assert room["b"] == math.ceil(m.LABEL_GAP_PX + 10 * 0.56 * 12 + m.BARE_EDGE_PX + m.SLACK_PX)
    assert room["l"] == math.ceil(m.LABEL_GAP_PX + 4 * 0.56 * 12 + m.BARE_EDGE_PX + m.SLACK_PX)
    assert room["r"] == math.ceil(m.LABEL_GAP_PX + 12 * 0.56 * 12 + m.BARE_EDGE_PX + m.SLACK_PX)


def test_a_colour_bar_takes_its_bar_and_the_widest_of_its_ticks_or_title():
    fig = go.Figure(go.Heatmap(z=[[0.0, 0.63]], colorbar=dict(thickness=12)))
    ticks = m.tick_texts(0.0, 0.63)
    assert ticks == ["0.0", "0.8"]  # a step of 0.2: one decimal
    assert m.room(fig)["r"] == math.ceil(m.COLORBAR_GAP_PX + 12 + 15 + 3 * 0.56 * 12 + m.SLACK_PX)
    titled = go.Figure(go.Heatmap(z=[[0.0, 1.0]], colorbar=dict(thickness=12, title=dict(text="a long title"))))
    assert m.room(titled)["r"] == math.ceil(m.COLORBAR_GAP_PX + 12 * 0.56 * 14 + 19 + m.SLACK_PX)
    hidden = go.Figure(go.Heatmap(z=[[0.0, 1.0]], showscale=False))
    assert m.room(hidden)["r"] == 0


def test_a_shared_colour_axis_takes_room_only_when_a_trace_draws_on_it():
    shared = go.Figure(go.Heatmap(z=[[0.0, 1.0]], coloraxis="coloraxis")).update_layout(
        coloraxis=dict(colorbar=dict(thickness=12)))
    assert m.room(shared)["r"] == math.ceil(m.COLORBAR_GAP_PX + 12 + 15 + 4 * 0.56 * 12 + m.SLACK_PX)
    unused = go.Figure(go.Heatmap(z=[[0.0, 1.0]], showscale=False)).update_layout(
        coloraxis=dict(colorbar=dict(thickness=12)))
    assert m.room(unused)["r"] == 0
    signed = go.Figure(go.Heatmap(z=[[0.0, 1.0]], coloraxis="coloraxis")).update_layout(
        coloraxis=dict(cmin=-0.025, cmax=0.025, colorbar=dict(thickness=12)))  # its range's labels
    assert m.tick_texts(-0.025, 0.025) == ["−0.03", "0.03"]
    assert m.room(signed)["r"] == math.ceil(m.COLORBAR_GAP_PX + 12 + 15 + 5 * 0.56 * 12 + m.SLACK_PX)


def test_a_colour_axis_the_layout_leaves_unset_still_draws_its_bar():
    """A trace on "coloraxis" with nothing of it in the layout: plotly.js draws the axis's colour bar (30 px thick,
    its range unknown here: labels of four characters)."""
    bar = math.ceil(m.COLORBAR_GAP_PX + 30 + 15 + 4 * 0.56 * 12 + m.SLACK_PX)
    assert m.room(go.Figure(go.Heatmap(z=[[1.0, 2.0]], coloraxis="coloraxis")))["r"] == bar
    marked = go.Scatter(x=[0, 1], y=[0, 1], mode="markers", marker=dict(color=[1, 2], coloraxis="coloraxis"))
    assert m.room(go.Figure(marked))["r"] == bar


def test_a_marker_colour_bar_counts_where_plotly_draws_it():
    """plotly.js draws a marker's colour bar when `showscale` is set, or when it is unset and a colour bar is given."""
    def scatter(**marker):
        return go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="markers", marker=dict(color=[0, 1], cmin=0, cmax=1,
                                                                                      **marker)))
    bar = math.ceil(m.COLORBAR_GAP_PX + 12 + 15 + 3 * 0.56 * 12 + m.SLACK_PX)  # "0.0", "1.0"
    assert m.room(scatter(colorbar=dict(thickness=12)))["r"] == bar
    assert m.room(scatter(showscale=True, colorbar=dict(thickness=12)))["r"] == bar
    assert m.room(scatter(showscale=False, colorbar=dict(thickness=12)))["r"] == 0
    assert m.room(scatter())["r"] == 0


def test_tick_texts_are_the_ends_at_a_round_step():
    assert m.tick_texts(0, 5) == ["0", "5"]
    assert m.tick_texts(-3, 250) == ["−50", "250"]
    assert m.tick_texts(0.001, 0.0042) == ["0.001", "0.005"]  # a step of 0.001
    assert m.tick_texts(1, 1) == ["1"]


def test_a_horizontal_legend_below_takes_a_row_for_each_plot_width_of_items():
    names = [f"head {i}" for i in range(12)]
    fig = go.Figure([go.Scatter(x=[0], y=[0], name=n) for n in names]).update_layout(
        width=400, legend=dict(orientation="h", y=-0.1), xaxis=dict(visible=False), yaxis=dict(visible=False))
    items = sum(m.text_px(n) + m.LEGEND_ITEM_PX for n in names)
    rows = math.ceil(items / 400)
    assert rows > 1 and m.room(fig)["b"] == math.ceil(rows * m.LEGEND_ROW_PX + m.SLACK_PX)
    beside = go.Figure([go.Scatter(x=[0], y=[0], name=n) for n in names[:2]]).update_layout(
        xaxis=dict(visible=False), yaxis=dict(visible=False))
    assert m.room(beside)["r"] == math.ceil(m.text_px("head 0") + m.LEGEND_ITEM_PX + m.SLACK_PX)
    one = go.Figure(go.Scatter(x=[0], y=[0], name="alone")).update_layout(
        xaxis=dict(visible=False), yaxis=dict(visible=False))
    assert m.room(one) == {"l": 0, "r": 0, "t": 0, "b": 0}  # one trace: no legend


def test_a_title_of_several_lines_is_hung_from_the_top_with_room_for_each_line():
    """Anchored above the plot, Plotly draws a title's first line there and the others down over the plot unless its
    automargin draws the chart again; hung from the figure's top (`style.top_title`), it gets its lines' room."""
    three = "one<br>two<br>three"
    fig = go.Figure().update_layout(title=plot_title(three), margin=margin(),
                                    xaxis=dict(visible=False), yaxis=dict(visible=False))
    # the toolbar's band and what Plotly lifts several lines by, three 22-px lines, the gap under them, and the slack
    # that keeps Plotly from pushing the margin itself
    assert m.room(fig)["t"] == 36 + 12 + 3 * 22 + 20 + m.SLACK_PX
    m.fit(fig)
    assert (fig.layout.title.yref, fig.layout.title.y, fig.layout.title.yanchor) == ("container", 1, "top")
    assert (fig.layout.title.pad.t, fig.layout.title.pad.b) == (36 + 12, 0)
    assert fig.layout.margin.t == 36 + 12 + 3 * 22 + 20 + m.SLACK_PX
    one = go.Figure().update_layout(title=plot_title("one line"), margin=margin(),
                                    xaxis=dict(visible=False), yaxis=dict(visible=False))
    assert m.room(one)["t"] == 0  # one line fits the figures' own top margin, above the plot
    m.fit(one)
    assert one.layout.title.yref == "paper" and one.layout.margin.t == margin()["t"]


def test_fit_grows_margins_never_shrinks_them_and_is_idempotent():
    fig = _heatmap(["a", "w" * 20]).update_layout(margin=dict(l=300, t=300))
    m.fit(fig)
    assert fig.layout.margin.l == 300 and fig.layout.margin.t == 300  # larger already: kept
    fig.update_layout(margin=dict(l=10))
    m.fit(fig)
    assert fig.layout.margin.l == m.room(fig)["l"] > 10
    before = fig.to_plotly_json()
    m.fit(fig)
    assert fig.to_plotly_json() == before
    bare = go.Figure(go.Heatmap(z=[[1.0]], x=["a"], y=["b"], showscale=False))  # no margins: Plotly's 80/100
    m.fit(bare)
    assert (bare.layout.margin.l, bare.layout.margin.t) == (80, 100)


def test_the_app_fits_a_chart_once(monkeypatch):
    from mha_viz.ui.kit import charts

    calls = []
    real = m.fit
    monkeypatch.setattr(m, "fit", lambda fig: calls.append(fig) or real(fig))
    fig = _heatmap(["a", "w" * 20])
    assert charts.fitted(fig) is fig and fig.layout.margin.l == m.room(fig)["l"]
    charts.fitted(fig)
    assert len(calls) == 1  # once: a figure shown again is not changed again
    assert charts.fitted("not a figure") == "not a figure"


def test_a_tall_colour_bar_has_plotlys_finer_ticks():
    """plotly.js puts about one tick a 40 px on a colour bar (5 to 10), at a step of 2, 5 or 10 times a power of ten:
    a bar from −2.4 to 2.4 over 400 px steps by 0.5 ("−1.5", four characters), over 150 px by 1 ("−2", two); the
    room is the wider of those labels and the range's ends at a coarse step ("−3")."""
    assert m.bar_ticks(-2.4, 2.4, 400) == ["−2", "−1.5", "−1", "−0.5", "0", "0.5", "1", "1.5", "2"]
    assert m.bar_ticks(-2.4, 2.4, 150) == ["−2", "−1", "0", "1", "2"]
    assert m.bar_ticks(0, 1, 300) == ["0", "0.2", "0.4", "0.6", "0.8", "1"]  # no trailing zero
    assert m.bar_ticks(1, 1, 300) == []
    tall = go.Figure(go.Heatmap(z=[[-2.4, 2.4]], zmin=-2.4, zmax=2.4, colorbar=dict(thickness=10))).update_layout(
        height=400 + 66 + 10, margin=dict(t=66, b=10))  # a plot 400 px high
    assert m.room(tall)["r"] == math.ceil(m.COLORBAR_GAP_PX + 10 + 15 + m.text_px("−1.5") + m.SLACK_PX)
    short = go.Figure(go.Heatmap(z=[[-2.4, 2.4]], zmin=-2.4, zmax=2.4, colorbar=dict(thickness=10))).update_layout(
        height=150 + 66 + 10, margin=dict(t=66, b=10))
    assert m.room(short)["r"] == math.ceil(m.COLORBAR_GAP_PX + 10 + 15 + m.text_px("−3") + m.SLACK_PX)
