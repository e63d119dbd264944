"""The line view's figure: lines exactly where weight ≥ threshold, focus on a query or a key,
each head's colour, a click on a token read back, and the payload at 128 tokens × 12 heads.
The lines are path shapes (one per head and opacity level), read back here from the JSON."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mha_viz import AttentionRun
from mha_viz.drawing import style as figure_style
from mha_viz.features.lines import figures as lf
from tests.helpers import decode_json


def _run(layers=2, heads=3, n=6, seed=0, causal=False):
    rng = np.random.default_rng(seed)
    a = rng.random((layers, heads, n, n)).astype(np.float32)
    if causal:
        a = np.tril(a)
    a /= a.sum(-1, keepdims=True)
    return AttentionRun.from_array(a, [f"t{i}" for i in range(n)])


def line_shapes(spec) -> list[dict]:
    return [shape for shape in spec["layout"].get("shapes", []) if shape.get("type") == "path"]


def drawn_weights(fig) -> dict[tuple[int, int, int], tuple[int, float]]:
    """(head, query, key) -> (level, opacity) of every line the figure draws, from its JSON."""
    out = {}
    for shape in line_shapes(decode_json(fig.to_json())):
        head, level, count = lf.shape_lines(shape)
        pairs = lf.path_segments(shape["path"])
        assert len(pairs) == count
        assert shape["legendgroup"] == f"H{head}" and shape["line"]["color"] == lf.head_color(head)
        for i, j in pairs:
            assert (head, i, j) not in out  # each line drawn once
            out[head, i, j] = (level, shape["opacity"])
    return out


def drawn(fig) -> set[tuple[int, int, int]]:
    """(head, query, key) of every line the figure draws, read back from its JSON."""
    return set(drawn_weights(fig))


def test_a_line_exists_exactly_where_the_weight_reaches_the_threshold():
    run = _run()
    for threshold in (0.0, 0.1, 0.2, 0.3):
        fig = lf.line_figure(run, 1, [0, 2], threshold=threshold)
        a = run.attentions[1]
        expected = {(h, i, j) for h in (0, 2) for i in range(run.n) for j in range(run.n)
                    if a[h, i, j] >= threshold}
        assert drawn(fig) == expected, threshold
        assert lf.drawn_lines(fig) == len(expected)


def test_threshold_one_draws_no_line_and_causal_zeros_are_never_lines():
    assert lf.drawn_lines(lf.line_figure(_run(), 0, threshold=1.0)) == 0
    run = _run(causal=True)
    lines = drawn(lf.line_figure(run, 0))
    assert lines and all(j <= i for _, i, j in lines)


def test_focus_on_a_query_keeps_only_its_lines_and_on_a_key_only_lines_to_it():
    run = _run()
    q = drawn(lf.line_figure(run, 0, focus=(lf.QUERY, 3)))
    assert {i for _, i, _ in q} == {3} and len(q) == run.num_heads * run.n
    k = drawn(lf.line_figure(run, 0, focus=(lf.KEY, 4)))
    assert {j for _, _, j in k} == {4} and len(k) == run.num_heads * run.n
    assert "from query 3" in lf.line_figure(run, 0, focus=(lf.QUERY, 3)).layout.title.text


def test_opacity_follows_the_weight_in_buckets():
    run = _run()
    a = run.attentions[0, 1]
    lines = drawn_weights(lf.line_figure(run, 0, [1]))
    assert len(lines) == run.n * run.n
    for (head, i, j), (lvl, opacity) in lines.items():
        assert head == 1
        assert lvl / lf.BUCKETS - 1e-6 < a[i, j] <= (lvl + 1) / lf.BUCKETS + 1e-6
        assert opacity == pytest.approx(lf.bucket_opacity(lvl))


def test_each_head_has_its_own_colour_and_a_legend_entry_that_holds_its_lines():
    run = _run(heads=12, n=4)
    fig = lf.line_figure(run, 0)
    colours = {}
    for shape in fig.layout.shapes:
        colours.setdefault(shape.legendgroup, set()).add(shape.line.color)
    assert len(colours) == 12
    assert all(c == {lf.head_color(int(g[1:]))} for g, c in colours.items())
    assert len({lf.head_color(h) for h in range(12)}) == 12
    legend = [t for t in fig.data if t.showlegend is not False and t.mode == "lines"]
    assert [t.name for t in legend] == [f"H{h}" for h in range(12)]
    # a click on a legend entry toggles its legend group: the head's shapes
    assert all(t.legendgroup == t.name and t.line.color == lf.head_color(int(t.name[1:])) for t in legend)
    assert all(s.showlegend is False and s.layer == "below" for s in fig.layout.shapes)  # markers on top


def test_token_markers_are_the_tokens_and_a_click_reads_back_side_and_token():
    run = AttentionRun.from_array(_run().attentions, ["<b>", "a", "a", "c", "d", "e"])
    fig = lf.line_figure(run, 0, window=(1, 5))
    queries, keys_ = fig.data[-2], fig.data[-1]
    assert [figure_style.label_text(t) for t in queries.text] == ["a", "a", "c", "d"]
    assert list(np.asarray(keys_.customdata)[:, 1]) == [1, 2, 3, 4]  # positions in the text
    event = [{"curve_number": len(fig.data) - 1, "point_index": 2, "customdata": [1, 3]}]
    assert lf.line_pick(event) == (lf.KEY, 3)
    assert lf.line_pick([{"curve_number": len(fig.data) - 2, "customdata": [0, 2]}]) == (lf.QUERY, 2)
    assert lf.line_pick([{"customdata": {"0": 1, "1": 4}}]) == (lf.KEY, 4)  # a typed row as JSON
    assert '"customdata":[[0,1],[0,2]' in fig.to_json().replace(" ", "")  # plain lists in the payload
    assert lf.line_pick([]) is None and lf.line_pick([{"curve_number": 3}]) is None
    assert "<b>" not in "".join(lf.line_figure(run, 0).data[-1].text)  # escaped


def test_window_keeps_lines_between_its_tokens_only():
    run = _run(n=10)
    lines = drawn(lf.line_figure(run, 0, window=(2, 6)))
    assert lines and all(0 <= i < 4 and 0 <= j < 4 for _, i, j in lines)  # rows of the window


@pytest.mark.parametrize("alpha", [0.05, 0.3, 1.0])
def test_payload_at_128_tokens_and_12_heads_stays_under_250_kb(alpha):
    rng = np.random.default_rng(1)
    a = rng.dirichlet(np.full(128, alpha), size=(1, 12, 128)).astype(np.float32)
    run = AttentionRun.from_array(a, [f"token{i}" for i in range(128)])
    fig = lf.line_figure(run, 0)
    size = len(fig.to_json())
    assert size <= 250_000, size  # ~12 bytes a line as path text
    assert lf.drawn_lines(fig) == lf.MAX_LINES  # the strongest lines, and the title says so
    assert "strongest" in fig.layout.title.text
    assert len(fig.data) == 12 + 2  # legend entries and the two token columns: no trace per line
    assert len(fig.layout.shapes) <= 12 * lf.BUCKETS  # one shape per head and bucket
    strongest = np.sort(a[0].ravel())[-lf.MAX_LINES:]
    kept = drawn(fig)
    assert len(kept) == lf.MAX_LINES
    assert min(a[0][h, i, j] for h, i, j in kept) >= strongest[0]


def test_the_strongest_lines_with_their_weights_and_labels_at_a_window_of_a_long_text():
    """Every (head, query, key, weight level) the figure draws, against the weights themselves:
    with a threshold, a window, a subset of heads and a cap on the lines."""
    rng = np.random.default_rng(7)
    n, window = 300, (100, 228)
    a = rng.dirichlet(np.full(n, 0.2), size=(2, 6, n)).astype(np.float32)
    tokens = [f"w{i % 17}" for i in range(n)]  # repeats: labels made distinct
    run = AttentionRun.from_array(a, tokens)
    heads, threshold, cap = [1, 3, 4], 0.01, 2_000
    fig = lf.line_figure(run, 1, heads, threshold=threshold, window=window, max_lines=cap)
    sub = a[1][heads][:, 100:228, 100:228]
    candidates = {(heads[p], i, j): float(sub[p, i, j]) for p, i, j in zip(*np.nonzero(sub >= threshold))}
    assert len(candidates) > cap
    cut = sorted(candidates.values())[-cap]
    expected = {key: w for key, w in candidates.items() if w >= cut}
    lines = drawn_weights(fig)
    assert set(lines) == set(expected) and lf.drawn_lines(fig) == cap
    assert fig.layout.meta["total"] == len(candidates)
    for key, (lvl, _) in lines.items():
        assert lvl == min(lf.BUCKETS - 1, math.ceil(expected[key] * lf.BUCKETS) - 1), key
    queries, keys_ = fig.data[-2], fig.data[-1]
    assert list(queries.text) == list(keys_.text) == figure_style.axis_labels(tokens[100:228])
    assert [c[1] for c in keys_.customdata] == list(range(100, 228))
    assert list(queries.y) == list(range(128)) and set(queries.x) == {lf.X_QUERY} and set(keys_.x) == {lf.X_KEY}


def test_cross_attention_lines_run_from_the_target_on_the_left_to_the_source_on_the_right():
    """A rectangular pattern (3 target tokens over 5 source tokens): each line joins target
    token i to source token j with its weight, and the two columns carry their own tokens."""
    from mha_viz.capture import CrossAttention

    a = np.zeros((1, 2, 3, 5), dtype=np.float32)
    a[0, 0, [0, 1, 2], [0, 2, 4]] = 1.0  # head 0: target i -> source 2i
    a[0, 1] = 0.2
    cross = CrossAttention(a, query_tokens=["le", "chat", "</s>"], key_tokens=["the", "cat", "sat", "down", "</s>"])
    fig = lf.line_figure(cross, 0, [0], threshold=0.5)
    assert sorted(drawn(fig)) == [(0, 0, 0), (0, 1, 2), (0, 2, 4)]
    queries, keys_ = (t for t in fig.data if t.name in ("query tokens", "key tokens"))
    assert list(queries.text) == figure_style.axis_labels(["le", "chat", "</s>"])  # escaped, as every label
    assert list(keys_.text) == figure_style.axis_labels(["the", "cat", "sat", "down", "</s>"])
    assert list(queries.x) == [lf.X_QUERY] * 3 and list(keys_.x) == [lf.X_KEY] * 5
    assert "Cross-attention, decoder layer 0: 1 head" in fig.layout.title.text
    focused = drawn(lf.line_figure(cross, 0, [1], focus=(lf.KEY, 4)))
    assert sorted(focused) == [(1, 0, 4), (1, 1, 4), (1, 2, 4)]  # every target token to source 4
