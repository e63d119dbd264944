"""One head's links for any run (`views.head_links`): a long run's, its scan's kept keys, against the same rule
applied to the dense run's rows of the same ~600 tokens (identical keys up to ties, weights and the rest within
1e-5), and the figures drawn from them (`head_view/links_figures`: the token strip, the heaviest links, the distance
histogram) the same for both kinds, drawn from a long run under `forbid_dense`."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from mha_viz.capture.head_rows import forbid_dense
from mha_viz.features.head_view import links_figures as link_figures
from mha_viz.scan import run as scan_run
from mha_viz.views import head_links
from tests.models.long_pairs import dense_and_long

pytestmark = pytest.mark.model


@pytest.fixture(scope="module", params=["minilm", "smollm2-6"])
def runs(request):
    """(dense run, long run) of the same ~600 tokens."""
    _, dense, long = dense_and_long(request.param)
    return dense, long


def some_heads(run) -> list[tuple[int, int]]:
    return [(0, 0), (1, run.num_heads - 1), (run.num_layers // 2, 1), (run.num_layers - 1, run.num_heads // 2)]


def assert_same_links(dense, got, want, layer: int, head: int) -> int:
    """Weights and rests within 1e-5; where two keys differ, the dense row weighs them the same within 1e-5 (a
    tie), or one side kept none there and the other's key weighs the threshold (a tie with it). Returns how
    many keys differ."""
    np.testing.assert_allclose(got.weights, want.weights, atol=1e-5)
    np.testing.assert_allclose(got.rest, want.rest, atol=1e-5)
    differ = np.argwhere(got.keys != want.keys)
    for r, s in differ:
        row = dense.rows(layer, head, int(r), int(r) + 1)[0]
        weigh = [row[k] if k >= 0 else head_links.MIN_WEIGHT for k in (got.keys[r, s], want.keys[r, s])]
        assert abs(weigh[0] - weigh[1]) <= 1e-5, (layer, head, r, s, got.keys[r], want.keys[r])
    return len(differ)


def test_the_rule_is_the_scans():
    defaults = inspect.signature(scan_run.scan).parameters
    assert (head_links.TOP_K, head_links.MIN_WEIGHT) == (defaults["top_k"].default, defaults["min_weight"].default)


def test_a_dense_runs_links_are_the_long_runs(runs):
    dense, long = runs
    assert long.summary is not None and dense.summary is None
    for layer, head in some_heads(dense):
        with forbid_dense():
            from_long = head_links.links(long, layer, head)
        from_dense = head_links.links(dense, layer, head)
        keys, weights = long.summary.top(layer, head)
        assert np.shares_memory(from_long.keys, keys) and np.shares_memory(from_long.weights, weights)  # the scan's
        assert (from_long.keys >= 0).any()
        differ = assert_same_links(dense, from_dense, from_long, layer, head)
        assert differ <= 0.01 * from_long.keys.size  # ties are rare


def test_the_figures_draw_the_same_for_both_kinds(runs):
    dense, long = runs
    for layer, head in some_heads(dense):
        with forbid_dense():
            strip = link_figures.token_strip(long, layer, head, 100)
            links = link_figures.heaviest_links(long, layer, head, skip_first=True)
            distances = link_figures.distance_histogram(long, layer, head)
            query = link_figures.query_links(long, layer, head, dense.n - 1)
        assert strip.layout.title.text == link_figures.token_strip(dense, layer, head, 100).layout.title.text
        np.testing.assert_allclose(strip.data[0].y, link_figures.token_strip(dense, layer, head, 100).data[0].y,
                                   atol=1e-5)
        want = link_figures.heaviest_links(dense, layer, head, skip_first=True)
        np.testing.assert_allclose(links["weight"], want["weight"], atol=1e-5)
        assert (links["key"] > 0).all() and len(links) == len(want)
        np.testing.assert_allclose(query["weight"], link_figures.query_links(dense, layer, head, dense.n - 1)["weight"],
                                   atol=1e-5)
        if (head_links.links(dense, layer, head).keys == long.summary.top(layer, head)[0]).all():  # no tie moved
            np.testing.assert_allclose(distances.data[0].y, link_figures.distance_histogram(dense, layer, head)
                                       .data[0].y, atol=1e-5)
