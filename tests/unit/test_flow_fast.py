"""`metrics.flow` (one max-flow per pair on the part of the graph between source and sink)
equals the plain implementation kept here (one max-flow per pair on the whole layered graph,
the code `flow` had before): both solve the same integer max-flow problems, whose values are
unique, so the tolerance is zero: the arrays are equal entry for entry. Checked on random runs
(causal and bidirectional, peaked so that capacities round to 0 and edges vanish, with
disconnected tokens) and on planted graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from mha_viz import AttentionRun, metrics
from mha_viz.metrics.across_layers import _FLOW_SCALE, _residual_attention


def _flow_ref(run: AttentionRun, layer: int | None = None) -> np.ndarray:
    """The reference: every (i, j) pair, the whole graph, scipy's Dinic."""
    n = run.n
    top = run.num_layers - 1 if layer is None else layer
    cap = np.rint(_residual_attention(run, top + 1) * _FLOW_SCALE).astype(np.int32)
    src, dst, val = [], [], []
    ii, jj = np.nonzero(np.ones((n, n), dtype=bool))
    for k in range(top + 1):
        c = cap[k][ii, jj]
        keep = c > 0
        src.append((k + 1) * n + ii[keep])
        dst.append(k * n + jj[keep])
        val.append(c[keep])
    size = (top + 2) * n
    graph = csr_matrix((np.concatenate(val), (np.concatenate(src), np.concatenate(dst))), shape=(size, size))
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            out[i, j] = maximum_flow(graph, (top + 1) * n + i, j, method="dinic").flow_value
    return out / out.sum(1, keepdims=True)


def _run(a: np.ndarray, causal: bool) -> AttentionRun:
    n = a.shape[-1]
    return AttentionRun.from_array(a, [f"t{i}" for i in range(n)], is_causal=causal)


def _random(rng, L, H, n, causal, power) -> np.ndarray:
    a = rng.random((L, H, n, n)) ** power
    if causal:
        a = np.tril(a)
    a[..., np.arange(n), np.arange(n)] += 1e-9  # no empty row
    return a / a.sum(-1, keepdims=True)


def _assert_equal(run: AttentionRun, layer: int | None = None) -> None:
    np.testing.assert_array_equal(metrics.flow(run, layer), _flow_ref(run, layer))


@settings(max_examples=40, deadline=None)
@given(L=st.integers(1, 4), H=st.integers(1, 3), n=st.integers(1, 9), causal=st.booleans(),
       power=st.sampled_from([1.0, 6.0, 40.0]), seed=st.integers(0, 2**16))
def test_flow_equals_reference_on_random_runs(L, H, n, causal, power, seed):
    """power 40 makes most weights round to capacity 0: many edges and paths vanish."""
    rng = np.random.default_rng(seed)
    run = _run(_random(rng, L, H, n, causal, power), causal)
    _assert_equal(run)
    _assert_equal(run, layer=int(rng.integers(L)))


@pytest.mark.parametrize("causal", [False, True])
def test_flow_equals_reference_on_a_larger_run(causal):
    rng = np.random.default_rng(7)
    _assert_equal(_run(_random(rng, 6, 2, 16, causal, 8.0), causal))


def _planted(n: int) -> dict[str, np.ndarray]:
    eye = np.eye(n)
    first = np.zeros((n, n))
    first[:, 0] = 1
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1
    blocks = np.zeros((n, n))  # two blocks that never meet: half the pairs have no path
    h = n // 2
    blocks[:h, :h] = 1 / h
    blocks[h:, h:] = 1 / (n - h)
    uniform = np.tril(np.ones((n, n)))
    return {"identity": eye, "first": first, "prev": prev, "blocks": blocks,
            "uniform": uniform / uniform.sum(-1, keepdims=True)}


@pytest.mark.parametrize("name", ["identity", "first", "prev", "blocks", "uniform"])
@pytest.mark.parametrize("causal", [False, True])
def test_flow_equals_reference_on_planted_graphs(name, causal):
    n = 8
    pats = _planted(n)
    layers = np.stack([pats[name], pats["prev"], pats[name]])[:, None]  # (3, 1, n, n)
    if causal:
        layers = np.tril(layers)
        layers /= layers.sum(-1, keepdims=True)
    _assert_equal(_run(layers, causal))


def test_flow_of_disconnected_blocks_is_zero_across_them():
    n = 6
    a = np.stack([_planted(n)["blocks"]] * 3)[:, None]
    f = metrics.flow(_run(a, False))
    assert (f[:3, 3:] == 0).all() and (f[3:, :3] == 0).all()
    np.testing.assert_allclose(f.sum(-1), 1.0, atol=1e-12)
