"""Head similarity, Across layers and Compare on a long run (no every-head array: rows recomputed a block at a
time) against the dense run of the same text (issue 52's fidelity, at 600 tokens): JS and cosine between every
pair of heads, rollout, flow and two runs compared head by head equal the dense computations within 1e-5, each
computed here the old way (every head flattened whole) as the reference, under `forbid_dense`. Rollout over the
capture budget is refused with the length that fits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz import metrics
from mha_viz.capture import head_rows
from mha_viz.metrics.js import js_matrix
from mha_viz.views import comparison, detail
from tests.models.long_pairs import TEXT, dense_and_long

pytestmark = pytest.mark.model
N = 600


@pytest.fixture(scope="module", params=["minilm", "smollm2-6"])
def runs(request):
    """(model, dense run, long run) of the same N tokens."""
    return dense_and_long(request.param, N)  # MiniLM reads 512


def dense_js(run) -> np.ndarray:
    """The JS matrix as it was computed before issue 52: every head flattened whole, in one call."""
    n, flat = run.n, run.attentions.reshape(run.num_layers * run.num_heads, -1)
    if run.is_causal:
        rows, cols = np.tril_indices(n)
        flat = flat[:, rows * n + cols]
    return js_matrix(torch.from_numpy(np.ascontiguousarray(flat)), n).numpy()


def dense_cosine(run) -> np.ndarray:
    flat = run.attentions.reshape(run.num_layers * run.num_heads, -1).astype(np.float64)
    inner = flat @ flat.T
    norms = np.sqrt(np.diag(inner))
    return inner / norms[:, None] / norms[None, :]


def dense_rollout(run) -> np.ndarray:
    a = run.attentions.astype(np.float64).mean(1)  # (L, n, n)
    a_hat = 0.5 * a + 0.5 * np.eye(run.n)
    a_hat /= a_hat.sum(-1, keepdims=True)
    out = [a_hat[0]]
    for layer in range(1, run.num_layers):
        out.append(a_hat[layer] @ out[-1])
    return np.stack(out)


def test_js_and_cosine_between_heads_are_the_dense_ones(runs):
    _model, dense, long = runs
    assert not long.is_dense and long.n == dense.n >= 500
    with head_rows.forbid_dense():
        js, cos = metrics.head_similarity(long, "js"), metrics.head_similarity(long, "cosine")
    assert not long.is_dense
    want = dense_js(dense)
    assert want.max() > 0.05  # heads differ: the comparison means something
    np.testing.assert_allclose(js, want, atol=1e-5)
    np.testing.assert_allclose(metrics.head_similarity(dense, "js"), want, atol=1e-5)
    np.testing.assert_allclose(cos, dense_cosine(dense), atol=1e-5)


def test_a_few_picked_heads_compare_as_in_the_dense_run_a_block_at_a_time(runs, monkeypatch):
    """Compare heads' pairwise table (`select_heads`): the picked heads of a long run, across layers, read a block
    of rows at a time (no head whole: 256 MB a head of SmolLM2 at 8,192 tokens), equal the dense run's pairs."""
    _model, dense, long = runs
    picked = [0, long.num_heads + 3, (long.num_layers - 1) * long.num_heads + 1, long.num_heads + 2]
    monkeypatch.setattr(type(long), "head", lambda *_: pytest.fail("a head of the long run built whole"))
    with head_rows.forbid_dense():
        sub, _ = metrics.select_heads(long, picked)
        got = {kind: metrics.head_similarity(sub, kind) for kind in ("js", "cosine")}
    monkeypatch.undo()
    assert not sub.is_dense and (sub.num_layers, sub.num_heads) == (1, len(picked))
    at = np.ix_(picked, picked)
    want = dense_js(dense)[at]
    assert want.max() > 0.05
    np.testing.assert_allclose(got["js"], want, atol=1e-5)
    np.testing.assert_allclose(got["cosine"], dense_cosine(dense)[at], atol=1e-5)


def test_rollout_and_per_head_rollout_are_the_dense_ones(runs):
    _model, dense, long = runs
    with head_rows.forbid_dense():
        rolled = metrics.rollout(long)
        through = metrics.rollout_through_head(long, 2, 1, rolled=rolled)
    want = dense_rollout(dense)
    np.testing.assert_allclose(rolled, want, atol=1e-5)
    np.testing.assert_allclose(through, dense.attentions[2, 1].astype(np.float64) @ want[1], atol=1e-5)


def test_rollout_over_the_capture_budget_names_the_length_that_fits(runs, monkeypatch):
    _model, _dense, long = runs
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    with pytest.raises(mha_viz.InputError, match=r"at most (\d+) tokens") as err:
        metrics.rollout(long)
    fits = int(err.value.args[0].split("at most ")[1].split(" tokens")[0])
    assert 0 < fits < long.n
    assert metrics.across_layers.rollout_bytes(long.num_layers, fits) <= 2**20 < metrics.across_layers.rollout_bytes(
        long.num_layers, fits + 1)


def test_two_runs_compared_token_by_token_are_the_dense_comparison(runs):
    model, dense_a, long_a = runs
    other = TEXT[40:]  # another text, cut to the same number of tokens
    dense_b = mha_viz.analyze(model, other, max_tokens=dense_a.n, dense=True)
    long_b = mha_viz.analyze(model, other, max_tokens=dense_a.n, dense=False)
    assert dense_b.n == dense_a.n
    with head_rows.forbid_dense():
        got = comparison.run_divergence(long_a, long_b)
    want = comparison.pattern_divergence(dense_a.attentions, dense_b.attentions)
    assert want.max() > 0.01
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(comparison.run_divergence(dense_a, dense_b), want, atol=1e-12)
    # every head at word level, a layer at a time, is each head's `detail.word_level`
    layer = 1
    words = comparison.word_layer(long_a, layer)
    for head in range(dense_a.num_heads):
        np.testing.assert_allclose(words[head], detail.word_level(dense_a.attentions[layer, head], dense_a.word_ids),
                                   atol=1e-5)


def test_flow_on_a_short_long_run_is_the_dense_runs():
    model = mha_viz.load_model("minilm", device="cpu")
    text = "The animal didn't cross the street because it was too tired."
    dense, long = (mha_viz.analyze(model, text, dense=d) for d in (True, False))
    with head_rows.forbid_dense():
        got = metrics.flow(long, 3)
    np.testing.assert_allclose(got, metrics.flow(dense, 3), atol=1e-5)


def test_a_run_without_its_special_tokens_is_drop_tokens_of_the_dense_run(runs):
    _model, dense, long = runs
    mask = np.asarray(dense.special_mask, dtype=bool)
    if not mask.any():
        pytest.skip("this model's runs hold no special token")
    want = dense.drop_tokens(mask)
    with head_rows.forbid_dense():
        got = comparison.without_special(long)
        layer = got.num_layers - 1
        assert got.n == want.n and got.tokens == want.tokens
        groups = [[list(g) for g in detail.word_groups(r.word_ids)] for r in (got, want)]
        assert groups[0] == groups[1]
        np.testing.assert_allclose(got.layer_rows(layer, 3, got.n), want.attentions[layer, :, 3:], atol=1e-5)
        np.testing.assert_allclose(comparison.word_layer(got, layer), comparison.word_layer(want, layer), atol=1e-5)
