"""The Head view's, Line view's and Compare heads' figures of a long run (`analyze(dense=False)`: rows
recomputed, no every-head array) against the same figures of the dense run of the same ~600 tokens: the same
labels and titles, heatmaps within 1e-5, the same lines; what they read (`views.head_reads`) against
`views.detail` of the dense head; and every one of them built under `forbid_dense`."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.capture.head_rows import forbid_dense
from mha_viz.drawing import heads as head_figures
from mha_viz.features.lines import figures as line_view
from mha_viz.views import detail, head_reads
from tests.models.long_pairs import dense_and_long

pytestmark = pytest.mark.model


@pytest.fixture(scope="module", params=["minilm", "smollm2-6"])
def runs(request):
    """(dense run, long run) of the same ~600 tokens."""
    _, dense, long = dense_and_long(request.param)
    assert long.n > 500
    return dense, long


def some_heads(run) -> list[tuple[int, int]]:
    return [(0, 0), (run.num_layers // 2, run.num_heads - 1), (run.num_layers - 1, run.num_heads // 2)]


def same_figure(got, want, atol: float = 1e-5) -> None:
    """Same title, traces of the same types and labels, numbers within atol (an image's PNG is left out:
    its pixels are the quantised values the invisible heatmap above it holds)."""
    assert got.layout.title.text == want.layout.title.text
    assert [t.type for t in got.data] == [t.type for t in want.data]
    for g, w in zip(got.data, want.data):
        if g.type == "image":
            assert (g.x0, g.y0) == (w.x0, w.y0)
            continue
        for name in ("x", "y", "text"):
            gv, wv = getattr(g, name, None), getattr(w, name, None)
            if gv is not None or wv is not None:
                np.testing.assert_array_equal(np.asarray(gv), np.asarray(wv))
        for name in ("z", "customdata"):
            gv, wv = getattr(g, name, None), getattr(w, name, None)
            assert (gv is None) == (wv is None), name
            if gv is not None:
                np.testing.assert_allclose(np.asarray(gv, dtype=float), np.asarray(wv, dtype=float), atol=atol)
        if g.type == "heatmap":
            assert (g.zmin, g.zmax) == pytest.approx((w.zmin, w.zmax), abs=atol)


def test_what_a_head_view_reads_is_the_dense_heads(runs):
    dense, long = runs
    n = dense.n
    rows, cols = [n - 1, 7, 300, 8, 299], [0, n - 1, 5, 200]
    for layer, head in some_heads(dense):
        a = dense.attentions[layer, head]
        for run in (dense, long):
            np.testing.assert_allclose(head_reads.window(run, layer, head, 40, 170), a[40:170, 40:170], atol=1e-5)
            np.testing.assert_allclose(head_reads.cells(run, layer, head, rows, cols),
                                       detail.subset(a, rows, cols), atol=1e-5)
            np.testing.assert_allclose(head_reads.word_level(run, layer, head), detail.word_level(a, dense.word_ids),
                                       atol=1e-5)
            keys, weights = head_reads.strongest_keys(run, layer, head)
            want = a.argmax(axis=1)
            ties = keys != want  # a different key only where the two weigh the same
            np.testing.assert_allclose(a[np.arange(n), keys], a[np.arange(n), want], atol=1e-5)
            assert ties.sum() <= n // 50
            np.testing.assert_allclose(weights, a[np.arange(n), want], atol=1e-5)
            first, _ = head_reads.strongest_keys(run, layer, head, 50)
            assert first.shape == (50,) and np.array_equal(first, keys[:50])
    with pytest.raises(IndexError):
        head_reads.cells(long, 0, 0, [n], [0])
    with pytest.raises(ValueError):
        head_reads.cells(long, 0, 0, [], [0])


class Chopped:
    """A run whose rows come 7 at a time: words and chosen rows split across blocks."""

    def __init__(self, run) -> None:
        self.run, self.n, self.word_ids = run, run.n, run.word_ids

    def source(self, layer, heads, start, stop):
        for first in range(start, stop, 7):
            yield first, self.run.attentions[layer, heads, first:min(first + 7, stop)]


def test_reads_across_blocks_of_rows(runs):
    dense, _ = runs
    chopped, a = Chopped(dense), dense.attentions[1, 1]
    assert max(np.bincount(dense.word_ids)) > 1  # some word has several pieces
    rows, cols = [dense.n - 1, 6, 7, 13, 14, 300], [3, 0, dense.n - 1]
    np.testing.assert_allclose(head_reads.cells(chopped, 1, 1, rows, cols), detail.subset(a, rows, cols), atol=1e-6)
    np.testing.assert_allclose(head_reads.word_level(chopped, 1, 1), detail.word_level(a, dense.word_ids), atol=1e-6)
    keys, weights = head_reads.strongest_keys(chopped, 1, 1, 40)
    assert np.array_equal(keys, a[:40].argmax(axis=1)) and np.array_equal(weights, a[:40].max(axis=1))


def test_head_figures_of_a_long_run_are_the_dense_runs(runs):
    dense, long = runs
    n = dense.n
    for layer, head in some_heads(dense):
        for rescale in (False, True):
            same_figure(head_figures.head_pooled(long, layer, head, rescale=rescale),
                        head_figures.head_pooled(dense, layer, head, rescale=rescale))
        same_figure(head_figures.head_heatmap(long, layer, head, window=(100, 180), clickable=True),
                    head_figures.head_heatmap(dense, layer, head, window=(100, 180), clickable=True))
        same_figure(head_figures.head_heatmap(long, layer, head, window=(10, 10 + 300), rescale=True),
                    head_figures.head_heatmap(dense, layer, head, window=(10, 10 + 300), rescale=True))  # an image
        same_figure(head_figures.head_heatmap(long, layer, head), head_figures.head_heatmap(dense, layer, head))
        same_figure(head_figures.head_words(long, layer, head), head_figures.head_words(dense, layer, head))
        picked = dict(rows=[n - 2, 3, 400, 4], cols=range(20, 90))
        same_figure(head_figures.head_heatmap(long, layer, head, **picked),
                    head_figures.head_heatmap(dense, layer, head, **picked))
    pooled = head_figures.head_pooled(dense, 1, 1)  # block max and mean: `detail.pooled` of the whole head
    top, mean, _ = detail.pooled(dense.attentions[1, 1], 128)
    np.testing.assert_allclose(np.asarray(pooled.data[0].z), top, atol=1e-6)
    np.testing.assert_allclose(np.asarray(pooled.data[0].customdata), mean, atol=1e-6)


def lines(fig) -> dict[tuple[int, int, int], int]:
    """(head, query row, key column) -> opacity level of every line a `line_figure` draws."""
    out = {}
    for shape in fig.layout.shapes:
        head, level, _ = line_view.shape_lines(shape)
        for i, j in line_view.path_segments(shape.path):
            out[head, i, j] = level
    return out


def test_line_view_of_a_long_run_is_the_dense_runs(runs):
    dense, long = runs
    layer, start, stop, threshold = dense.num_layers // 2, 200, 200 + line_view.MAX_TOKENS, 0.02
    key = start + int(dense.attentions[layer, 1, start:stop, start:stop].sum(axis=0).argmax())  # a key looked at
    for heads, focus in (([0, 2], None), (list(range(dense.num_heads)), (line_view.QUERY, 250)),
                         ([1], (line_view.KEY, key))):
        kw = dict(threshold=threshold, focus=focus, window=(start, stop))
        got, want = line_view.line_figure(long, layer, heads, **kw), line_view.line_figure(dense, layer, heads, **kw)
        assert [t.name for t in got.data] == [t.name for t in want.data]
        for g, w in zip(got.data[len(heads):], want.data[len(heads):]):  # the token columns
            assert list(g.text) == list(w.text) and list(map(list, g.customdata)) == list(map(list, w.customdata))
        assert got.layout.meta["tokens"] == want.layout.meta["tokens"] == stop - start
        assert got.layout.meta["total"] <= line_view.MAX_LINES  # every line drawn: no cut to compare
        a = dense.attentions[layer][heads][:, start:stop, start:stop]
        mine, theirs = lines(got), lines(want)
        assert theirs
        if focus is None:  # the dense figure draws every weight ≥ threshold of these heads at its level
            drawn = np.nonzero((a >= threshold) & (a > 0))
            level = np.clip(np.ceil(a[drawn] * line_view.BUCKETS).astype(int) - 1, 0, line_view.BUCKETS - 1)
            assert theirs == {(heads[h], i, j): lvl for h, i, j, lvl in zip(*drawn, level)}
        for line in set(mine) | set(theirs):  # a line differs only where its weight sits on an edge
            if mine.get(line) != theirs.get(line):
                w = a[heads.index(line[0]), line[1], line[2]]
                edges = np.append(np.arange(1, line_view.BUCKETS) / line_view.BUCKETS, threshold)
                assert np.abs(edges - w).min() < 1e-5, (line, w)


def test_every_figure_of_a_long_run_builds_without_every_heads_array(runs):
    _, long = runs
    n = long.n
    with forbid_dense():
        for level in (head_figures.TOKENS, head_figures.BLOCKS, head_figures.WORDS):
            head_figures.head_figure(long, 1, 1, level=level)
        head_figures.head_heatmap(long, 1, 1, window=(n - 90, n), clickable=True)
        head_figures.head_heatmap(long, 1, 1, rows=range(n - 5, n), cols=range(n))
        head_reads.strongest_keys(long, 1, 1, 100)
        line_view.line_figure(long, 1, window=line_view.first_window(long))
        line_view.line_figure(long, 1, [0], window=(n - 10, n), focus=(line_view.KEY, n - 3))
    assert not long.is_dense
