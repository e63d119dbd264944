"""The metrics' `device` option: device="cpu" gives exactly what the default gives (head table,
importance, every per-text similarity, rollout); on CUDA, when there is one, the same values
within float32 rounding, and the same pattern classes up to heads within that rounding of a rule's
threshold. Also the faster paths of issue 15 against plain computations: rollout (float32) against a float64
reference at n = 300, importance against the materialised head writes, and the three-block Gram
against a full product."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from mha_viz import metrics
from mha_viz.metrics import head_stats
from mha_viz.metrics.gram import gram_upper, symmetric_numpy
from mha_viz.metrics.head_stats import classify
from tests.helpers import class_inputs, random_run
from tests.tolerance import assert_same_class

KINDS = ["js", "cosine", "cka", "residual", "seed_r"]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [9, 300])
def test_cpu_device_equals_default(causal, n):
    run, w = random_run(n=n, causal=causal)
    pd.testing.assert_frame_equal(metrics.head_table(run, w, device="cpu"), metrics.head_table(run, w))
    for kind in KINDS:
        np.testing.assert_array_equal(metrics.head_similarity(run, kind, weights=w, device="cpu"),
                                      metrics.head_similarity(run, kind, weights=w), err_msg=kind)
    np.testing.assert_array_equal(metrics.rollout(run, device="cpu"), metrics.rollout(run))
    for name, value in metrics.head_output_norms(run, w, device="cpu").items():
        np.testing.assert_array_equal(value, metrics.head_output_norms(run, w)[name], err_msg=name)


def _rollout_ref(a: np.ndarray) -> np.ndarray:
    out, acc = [], np.eye(a.shape[-1])
    for layer in a.astype(np.float64):
        m = 0.5 * layer.mean(0) + 0.5 * np.eye(a.shape[-1])
        acc = (m / m.sum(-1, keepdims=True)) @ acc
        out.append(acc)
    return np.stack(out)


# rollout in float32 (`across_layers.DTYPE`) against the float64 reference: each of L products rounds every entry
# (at most 1) to float32's 6e-8 and sums n terms. 4 layers at n = 300 reach 4.7e-7 here; 2e-6 is a 1,600th of
# a typical entry (1/300), so a weight on the identity off by 1e-4 fails
ROLLOUT_ATOL = 2e-6


def test_rollout_matches_float64_reference_on_a_long_run():
    """Heads summed and multiplied in float32: within float32's rounding of the float64 computation at n = 300,
    12 heads."""
    run, _ = random_run(L=4, H=12, n=300)
    rolled = metrics.rollout(run)
    assert rolled.dtype == np.float32
    np.testing.assert_allclose(rolled, _rollout_ref(run.attentions), rtol=0, atol=ROLLOUT_ATOL)
    rolled64 = metrics.rollout(run, dtype=torch.float64)  # the old precision, on request: its old bound
    assert rolled64.dtype == np.float64
    np.testing.assert_allclose(rolled64, _rollout_ref(run.attentions), rtol=0, atol=1e-8)


@pytest.mark.parametrize(("causal", "n"), [(False, 40), (True, 600)])  # 600: past one block of the causal product
def test_one_layers_rollout_alone_is_that_layer_of_every_layers(causal, n, monkeypatch):
    """`rollout_layer` (two buffers taking turns) gives each layer of `rollout` bit for bit, and R_{l-1} handed to
    `rollout_through_head` as `below` what the whole rollout gives; it is admitted where every layer's is not."""
    from mha_viz import InputError
    from mha_viz.metrics import across_layers

    run, _ = random_run(L=4, H=3, n=n, causal=causal)
    whole = metrics.rollout(run)
    for layer in (0, 1, 3, -1):
        np.testing.assert_array_equal(metrics.rollout_layer(run, layer), whole[layer], err_msg=str(layer))
    through = metrics.rollout_through_head(run, 2, 1, rolled=whole)  # a causal run past one block: by blocks
    np.testing.assert_allclose(through, run.head(2, 1).astype(np.float64) @ whole[1], rtol=0, atol=ROLLOUT_ATOL)
    assert not causal or not np.triu(through, 1).any()
    np.testing.assert_array_equal(metrics.rollout_through_head(run, 2, 1, below=metrics.rollout_layer(run, 1)), through)
    np.testing.assert_array_equal(metrics.rollout_through_head(run, 2, 1), through)
    with pytest.raises(ValueError, match="not both"):
        metrics.rollout_through_head(run, 2, 1, whole, below=whole[1])
    if n < 600:
        return
    every, one = across_layers.rollout_bytes(run.num_layers, n), across_layers.rollout_bytes(2, n)
    mb = int((every + one) / 2 / 2**20)  # the budget is whole MiB
    assert one <= mb * 2**20 < every
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", str(mb))
    with pytest.raises(InputError, match="Rollout"):
        metrics.rollout(run)
    np.testing.assert_array_equal(metrics.rollout_layer(run, -1), whole[-1])
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    with pytest.raises(InputError, match="one layer"):
        metrics.rollout_layer(run, -1)


def test_importance_matches_materialised_writes():
    """‖z W_O‖ through the QR of W_O equals the norms of the materialised writes, zero head included."""
    run, w = random_run(L=2, H=3, n=40, d_v=8, d=32)
    w["W_O"][1, 2] = 0.0
    z = run.head_outputs.astype(np.float64)
    o = np.einsum("lhtv,lhvd->lhtd", z, w["W_O"].double().numpy())
    imp = metrics.head_output_norms(run, w)
    np.testing.assert_allclose(imp["output_norm"], np.linalg.norm(o, axis=-1).mean(-1), rtol=1e-5)
    np.testing.assert_allclose(imp["mean_output_norm"], np.linalg.norm(o.mean(2), axis=-1), rtol=1e-5, atol=1e-6)
    assert imp["output_norm"][1, 2] == 0.0 and imp["mean_output_norm"][1, 2] == 0.0


@pytest.mark.parametrize("N", [1, 2, 5, 144])
def test_gram_blocks_equal_full_product(N):
    f = torch.randn(N, 50)
    got = symmetric_numpy(gram_upper(f))
    np.testing.assert_allclose(got, (f.double() @ f.double().T).numpy(), rtol=1e-5, atol=1e-4)
    assert np.array_equal(got, got.T)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_equals_cpu():
    run, w = random_run(n=64, causal=True)
    cpu, gpu = metrics.head_table(run, w), metrics.head_table(run, w, device="cuda")
    numeric = cpu.columns.drop(["pattern"])
    np.testing.assert_allclose(gpu[numeric].to_numpy(float), cpu[numeric].to_numpy(float), rtol=1e-5, atol=1e-6)
    ref = class_inputs(run)  # the CPU's, the table's own
    assert_same_class(cpu["pattern"], gpu["pattern"], ref, classify,
                      {k: 1e-6 + 1e-5 * np.abs(v) for k, v in ref.items()}, "CUDA against the CPU")
    for kind in KINDS:
        np.testing.assert_allclose(metrics.head_similarity(run, kind, weights=w, device="cuda"),
                                   metrics.head_similarity(run, kind, weights=w), rtol=1e-5, atol=1e-6, err_msg=kind)
    np.testing.assert_allclose(metrics.rollout(run, device="cuda"), metrics.rollout(run), atol=ROLLOUT_ATOL)
    stats = head_stats.pattern_stats(run, device="cuda")
    assert all(v.dtype == np.float64 for v in stats.values())


def test_the_app_runs_metrics_where_the_model_is():
    """The app's cached metrics go to the model's GPU when it has one, and stay on the CPU otherwise."""
    from types import SimpleNamespace

    from mha_viz.ui.kit import analysis

    assert analysis.metric_device(SimpleNamespace(device=torch.device("cpu"))) is None
    assert analysis.metric_device(SimpleNamespace(device=torch.device("cuda", 0))) == "cuda:0"
    assert analysis.metric_device(None) is None


def test_rollout_of_a_causal_run_past_one_block_matches_the_reference():
    """A causal run longer than `across_layers.LOWER_BLOCK` is rolled out block by block (the products of
    lower-triangular matrices): the float64 reference's values within float32's rounding, exact zeros above
    the diagonal."""
    from mha_viz.metrics import across_layers

    n = across_layers.LOWER_BLOCK + 88  # two row blocks, the second part full
    run, _ = random_run(L=3, H=2, n=n, causal=True)
    rolled = metrics.rollout(run)
    np.testing.assert_allclose(rolled, _rollout_ref(run.attentions), rtol=0, atol=ROLLOUT_ATOL)
    assert not np.triu(rolled, 1).any()
