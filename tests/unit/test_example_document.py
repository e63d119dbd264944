"""A head example's document figure (`mha_viz.features.examples.figures.document_figure`): a long document is
drawn at the size of a short one, cut to whole rows around the query (which is framed where it is),
each shown key shaded by the weight that query gives it; a short document is drawn whole."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.features.examples import figures as example_figures


def _document(n: int, query: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    pattern = np.tril(rng.random((n, n)))
    pattern /= pattern.sum(1, keepdims=True)
    return [f"t{i}" for i in range(n)], pattern


@pytest.mark.parametrize("n, query", [(600, 400), (600, 3), (600, 599), (300, 150)])
def test_a_long_document_is_a_window_around_its_query(n, query):
    tokens, pattern = _document(n, query)
    per_row, window = 16, example_figures.WINDOW
    fig = example_figures.document_figure(tokens, pattern, "Document 7 · score 0.5", query=query)
    heat, frame = fig.data[0], fig.data[1]
    text = [t for t in np.asarray(heat.text).ravel() if t]
    start, stop = int(text[0][1:]), int(text[-1][1:]) + 1  # the tokens drawn, read off their labels
    assert start % per_row == 0 and start <= query < stop  # whole rows, the query among them
    assert stop - start == window or (stop == n and window - per_row < stop - start <= window)  # a last row short
    assert abs((query - start) - (stop - 1 - query)) <= 2 * per_row or start == 0 or stop == n  # centred
    assert f"tokens {start}–{stop - 1} of {n}" in fig.layout.title.text
    shown = np.asarray(heat.customdata, dtype=float).ravel()[:stop - start]
    np.testing.assert_allclose(shown, pattern[query, start:stop])
    assert (frame.x[0], frame.y[0]) == ((query - start) % per_row, (query - start) // per_row)
    assert text[(frame.y[0] * per_row) + frame.x[0]] == f"t{query}"  # the framed cell is the query's token
    short = example_figures.document_figure(*_document(window, 0), "Document 1", query=5)
    assert fig.layout.height == short.layout.height  # the same readable size as a document that fits


def test_a_short_document_is_drawn_whole():
    tokens, pattern = _document(40, 0)
    fig = example_figures.document_figure(tokens, pattern, "Document 1 · score 0.2", query=30)
    assert fig.layout.title.text == "Document 1 · score 0.2"
    np.testing.assert_allclose(np.asarray(fig.data[0].customdata, dtype=float).ravel()[:40], pattern[30])
    assert (fig.data[1].x[0], fig.data[1].y[0]) == (30 % 16, 30 // 16)
