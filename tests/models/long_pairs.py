"""The dense run and the long run of the same text (issue 52's fidelity tests: a long run's views against the
dense run's, where that fits): one place that loads a bundled model and analyses the sample text both ways."""

from __future__ import annotations

import functools

import numpy as np

import mha_viz
from mha_viz.metrics import row_blocks
from mha_viz.metrics.measures import METRICS
from mha_viz.views import detail
from tests import first_layers
from tests.helpers import ROOT

TEXT = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()
def load(name: str):
    """A bundled model by its name, or one of FIRST_LAYERS' (tests/first_layers.py: saved once a process)."""
    return mha_viz.load_model(first_layers.folder(name) if name in first_layers.FIRST_LAYERS else name, device="cpu")


def dense_and_long(name: str, n: int = 600, text: str = TEXT):
    """(model, dense run, long run) of the first n tokens of `text` (fewer where the model reads fewer): made once a
    test process, for every file that compares a long run's views with the dense run's (the whole SmolLM2's pair
    cost about 6 s on 2 cores; its FIRST_LAYERS', 6 of 30 layers, 2.1 s, and 2.9 s to cut and save). The tests read
    them; what a test adds to the long run (its value norms) is what the app adds."""
    return _made(name, n, text)  # one key however the caller names the arguments


@functools.cache
def _made(name: str, n: int, text: str):
    model = load(name)
    cap = min(n, model.max_positions)
    dense = mha_viz.analyze(model, text, max_tokens=cap, dense=True)
    long = mha_viz.analyze(model, text, max_tokens=cap, dense=False)
    assert dense.is_dense and not long.is_dense and long.tokens == dense.tokens
    return model, dense, long


def assert_same_rows(ours, ref, atol: float = 1e-5) -> None:
    """`ours` (a long run) answers rows, layer_rows, head, column and pooled_head as the dense run `ref` holds
    them, within `atol`, on three layers (a head each) and three keys."""
    n, edges = ref.n, detail.block_edges(ref.n, 48)
    for layer in sorted({0, ref.num_layers // 2, ref.num_layers - 1}):
        head = (3 * layer + 1) % ref.num_heads
        a = ref.attentions[layer, head]
        np.testing.assert_allclose(ours.rows(layer, head, 5, 77), a[5:77], atol=atol)
        np.testing.assert_allclose(ours.rows(layer, head, n - 1, n), a[n - 1:], atol=atol)
        np.testing.assert_allclose(ours.layer_rows(layer, n // 6, n // 2), ref.attentions[layer, :, n // 6:n // 2],
                                   atol=atol)
        np.testing.assert_allclose(ours.head(layer, head), a, atol=atol)
        for key in (0, n // 3, n - 1):
            np.testing.assert_allclose(ours.column(layer, head, key), a[:, key], atol=atol)
        top, mean, _ = detail.pooled(a, 48)  # the whole head pooled at once, by the other code
        pooled_top, pooled_mean = ours.pooled_head(layer, head, edges)
        np.testing.assert_allclose(pooled_top, top, atol=atol)
        np.testing.assert_allclose(pooled_mean, mean, atol=1e-6)
        # every head of the layer at once, as rollout reads it: each block over only the keys it spans
        np.testing.assert_allclose(row_blocks.head_mean(ours, layer), ref.attentions[layer].mean(0, dtype=np.float64),
                                   atol=atol)


def assert_same_table(ours, ref) -> None:
    """A long run's head table `ours` (its scan's pattern columns) equals the dense run's `ref` within 1e-5
    (relative for the unbounded measures: entropy in nats, distance in tokens)."""
    numeric = [c for c in ours.columns if c not in ("layer", "head", "pattern")]
    assert len(numeric) >= 10 and set(numeric) <= set(ref.columns)
    for column in numeric:
        bounded = column in METRICS and METRICS[column].bounded
        np.testing.assert_allclose(ours[column].to_numpy(float), ref[column].to_numpy(float), atol=1e-5,
                                   rtol=0 if bounded else 1e-5, err_msg=column)
