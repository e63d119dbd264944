"""The row measures inside the attention kernel (`mha_viz.metrics.row_triton`, issue 87), compiled on a GPU, else run
by Triton's interpreter on CPU tensors (tests/conftest.py turns it on): for each mask and score kind our MHA covers
(causal, bidirectional, a sliding window, chunks, learned sinks, soft-capping, grouped-query heads, padding, a
two-segment encoder input) the kernel's output, each row's log-sum-exp and every measure of the row table equal a
dense computation written here in float64 (softmax of the masked scores, the sink's logit in the denominator) read by
the tensors' backend (`row_stats.RowStats`); bfloat16 inputs are read in float32; a record added to the table is in
the kernel's measures too; and the kernel's text with its causal mask dropped fails. Under the interpreter a call
takes a few seconds, so the texts are short."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mha_viz.metrics import row_triton
from mha_viz.metrics.row_measures import TextFacts, measures_from_sums
from mha_viz.metrics.row_stats import RowStats
from mha_viz.metrics.row_table import RECORDS, RowMeasure, RowTable

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("triton_kernels")]

H, G, N, D, DV = 4, 2, 29, 8, 6  # two query heads on each KV head


def _dense(q, k, v, causal, *, softcap=0.0, window=0, chunk=0, sinks=None, valid=None):
    """(P (H, n, n), P·V, each row's log-sum-exp) in float64, as an eager attention computes them."""
    h, n, d = q.shape
    kk = k.double().repeat_interleave(h // k.shape[0], 0)
    vv = v.double().repeat_interleave(h // v.shape[0], 0)
    s = q.double() @ kk.transpose(1, 2) / math.sqrt(d)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    ok = torch.ones(n, n, dtype=torch.bool)
    if causal:
        ok &= j <= i
    if window:
        ok &= (j > i - window) if causal else ((j - i).abs() <= window)
    if chunk:
        ok &= j // chunk == i // chunk
    if valid is not None:
        ok &= valid.bool()[None, :]
    s = s.masked_fill(~ok, float("-inf"))
    if sinks is not None:  # one more logit a head, no key's
        s = torch.cat([s, sinks.double()[:, None, None].expand(h, n, 1)], -1)
    p = torch.softmax(s, -1)[..., :n]
    return p, p @ vv, torch.logsumexp(s, -1)


def _inputs(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).to(dtype) for shape in ((H, N, D), (G, N, D), (G, N, DV))]


def _facts(causal, *, two=False, table=None):
    tokens = ["[CLS]"] + [f"w{t % 5}" for t in range(N - 2)] + ["."]
    special = [True] + [False] * (N - 1)
    if two:  # [CLS] a [SEP] b [SEP]: two segments
        special[N // 2], special[-1], tokens[N // 2], tokens[-1] = True, True, "[SEP]", "[SEP]"
    ids = [1] + [10 + t % 5 for t in range(N - 2)] + [3]
    return TextFacts.of(tokens, ids, special, causal=causal, table=table)


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # compiled for a GPU, else Triton's interpreter


TOP_K, MIN_WEIGHT, THUMB = 5, 0.02, 7  # 29 positions in 7 cells: neighbouring cells share a position


def _kept(got, p):
    """The kernel's kept keys, weights, rest and thumbnails against the dense probabilities p (H, n, n): each row's
    heaviest TOP_K of weight ≥ MIN_WEIGHT (torch.topk; the same keys up to ties), the rest of the row's mass, and
    PyTorch's adaptive max-pool."""
    weights, keys = torch.topk(p.float(), TOP_K, dim=-1)
    weights = torch.where(weights >= MIN_WEIGHT, weights, 0.0)
    keys = torch.where(weights > 0, keys, -1)
    np.testing.assert_allclose(got.weights.cpu().numpy(), weights.numpy(), atol=2e-6)
    np.testing.assert_allclose(got.rest.cpu().numpy(), (p.float().sum(-1) - weights.sum(-1)).numpy(), atol=2e-5)
    tied = np.zeros(weights.shape, bool)  # a weight within 1e-6 of a neighbour's, or of the row's next key
    gaps = np.abs(np.diff(torch.topk(p.float(), TOP_K + 1, dim=-1)[0].numpy(), axis=-1)) < 1e-6
    tied[..., 1:] |= gaps[..., :-1]
    tied |= gaps
    assert (got.keys.cpu().numpy() == keys.numpy())[~tied].all()
    cells = torch.nn.functional.adaptive_max_pool2d(p.float()[:, None], THUMB)[:, 0]
    np.testing.assert_allclose(got.cells.cpu().numpy(), cells.numpy(), atol=2e-6)


def _check(q, k, v, facts, *, atol=2e-5, **kinds):
    on = {name: x.to(DEVICE) if isinstance(x, torch.Tensor) else x for name, x in kinds.items()}
    done = row_triton.rows_of(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), facts, top_k=TOP_K, min_weight=MIN_WEIGHT,
                              thumb=THUMB, block_rows=16, block_keys=16, **on)
    out, lse = done.out.cpu(), done.lse.cpu()
    got = measures_from_sums(row_triton.sums_of(done.rows, facts), facts.n, facts.table)
    p, o, sums_lse = _dense(q, k, v, facts.causal, **kinds)
    _kept(done, torch.nan_to_num(p))
    o = torch.nan_to_num(o)  # a row that sees no key: NaN in the softmax, 0 in the kernel (and in the backends)
    reference = RowStats(facts, H, "cpu")
    reference.add(torch.nan_to_num(p).float(), 0, 0)
    want = reference.finish()
    np.testing.assert_allclose(out.double().numpy(), o.numpy(), atol=atol)
    np.testing.assert_allclose(lse.double().numpy(), sums_lse.numpy(), atol=atol)
    for name in facts.table.stat_names:
        np.testing.assert_allclose(got[name], want[name], atol=atol, equal_nan=True, err_msg=name)
    return got


@pytest.mark.parametrize("causal, kinds", [
    (True, {}), (False, {}), (True, {"window": 5}), (False, {"window": 4}), (True, {"chunk": 8}),
    (True, {"softcap": 2.0}),
    (True, {"sinks": torch.tensor([0.5, -1.0, 2.0, 0.0])}),
    (False, {"valid": torch.tensor([1] * (N - 4) + [0] * 4)}),  # the last four keys padding
])
def test_the_kernel_equals_the_dense_attention_and_its_measures(causal, kinds):
    _check(*_inputs(), _facts(causal), **kinds)


def test_rows_that_see_no_key_measure_nothing():
    """Causal attention with left padding: the first rows see no key at all (log-sum-exp −inf). They add nothing,
    and the sink mass stays finite (it was NaN: the first key's probability was exp(−inf + inf))."""
    got = _check(*_inputs(4), _facts(True), valid=torch.tensor([0, 0, 0] + [1] * (N - 3)))
    assert np.isfinite(got["sink"]).all()


@pytest.mark.parametrize("big, sinks", [(35.0, None), (0.0, torch.tensor([14.0, 11.0, 8.0, 14.0]))])
def test_a_sink_that_takes_nearly_all_leaves_the_rest_measured(big, sinks):
    """The first key aligned with every query (about 0.999 of each row), or a learned sink's large logit: the mass
    after the sink is summed over its keys, not taken as 1 − the sink's in float32 (which lost most of its digits:
    a normalised entropy above 1)."""
    q, k, v = _inputs(5)
    u = torch.zeros(D)
    u[0] = 1.0
    q, k = u + 0.3 * q, 0.3 * k
    k[:, 0] = big * u
    got = _check(q, k, v, _facts(True), **({} if sinks is None else {"sinks": sinks}))
    assert (got["beyond_norm_entropy"] <= 1).all()


def test_a_two_segment_input_gives_the_segment_measure():
    got = _check(*_inputs(1), _facts(False, two=True))
    assert (got["in_segment"] > 0).all()  # measured, not the one-segment 0


def test_half_precision_inputs_are_read_in_float32():
    """bfloat16 queries, keys and values: the kernel reads them in float32, so against the dense reference of the
    same rounded inputs only float32's rounding is left (a kernel computing in bfloat16 would be ~1e-2 off)."""
    _check(*_inputs(2, torch.bfloat16), _facts(True))


def test_a_new_record_is_in_the_kernels_measures():
    table = RowTable(RECORDS + (RowMeasure("prev2", "offset", "Two back", "mean_i A_i,i−2", "looks two back",
                                           "does not", param=-2, beyond=True),))
    got = _check(*_inputs(3), _facts(True, table=table))
    assert "prev2" in got and "beyond_prev2" in got


def test_a_planted_defect_is_seen():
    """The kernel's text with the causal mask dropped gives other probabilities: the comparison above fails."""
    facts = _facts(True)
    text = row_triton.source(facts.table)
    broken = text.replace("sc_ok = sc_ok & (cols[None, :] <= rows[:, None])", "sc_ok = sc_ok")
    assert broken != text
    original = row_triton.source
    try:
        row_triton.source = lambda table: broken
        with pytest.raises(AssertionError):
            _check(*_inputs(), facts)
    finally:
        row_triton.source = original


def _compiled(*flags: str) -> list[dict]:
    """tests/triton_compile.py's launches, compiled for a Hopper GPU in a process without the interpreter."""
    import json
    import os
    import subprocess
    import sys

    from tests.helpers import ROOT

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "tests.triton_compile", *flags], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_kernel_compiles_for_a_gpu_without_one():
    """Every constant's values (causal or not, sinks, segments, kept keys and thumbnails) compile to Hopper machine
    code here too, where the interpreter would have let through a text the compiler refuses; the text before the
    fix of the first compile on an H200 is refused."""
    launches = _compiled()
    assert {(o["kernel"], o["constants"]["CAUSAL"]) for o in launches} == {(k, c) for k in ("_lse", "_rows")
                                                                           for c in (True, False)}
    for constant in ("HAS_SINK", "HAS_SEG", "THUMB"):  # each on and off
        assert {o["constants"][constant] for o in launches if constant in o["constants"]} == {True, False}
    assert [o for o in launches if o["error"]] == []
    planted = _compiled("--plant")
    assert planted and all("CompilationError" in (o["error"] or "") for o in planted)
