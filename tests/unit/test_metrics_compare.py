"""Head-to-head comparisons, importance, diversity and cross-layer measures of `mha_viz.metrics`,
each checked against an independent computation written out here in float64 numpy
(`docs/head-metrics.md`, sections 2-4), on planted arrays and random weights (no model).
The same measures through real models: tests/models/test_head_outputs.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_viz import AttentionRun, metrics

# --- independent reference implementations (float64 numpy, materialised matrices) ----------------

def _cos_matrix(flat: np.ndarray) -> np.ndarray:
    """Cosine of every pair of rows."""
    flat = np.asarray(flat, dtype=np.float64)
    norms = np.linalg.norm(flat, axis=1)
    return (flat @ flat.T) / np.outer(norms, norms)


def _np(w) -> np.ndarray:
    return w.detach().cpu().double().numpy() if isinstance(w, torch.Tensor) else np.asarray(w, dtype=np.float64)


def _kv_index(h: int, H: int, G: int) -> int:
    return h // (H // G)


def _qk_ref(weights) -> np.ndarray:
    """Cosines of the materialised W_Q[h] W_K[kv(h)]ᵀ (d_model × d_model) of every head."""
    q, k = _np(weights["W_Q"]), _np(weights["W_K"])
    L, H, G = q.shape[0], q.shape[1], k.shape[1]
    mats = [q[layer, h] @ k[layer, _kv_index(h, H, G)].T for layer in range(L) for h in range(H)]
    return _cos_matrix(np.stack([m.ravel() for m in mats]))


def _ov_ref(weights) -> np.ndarray:
    """Cosines of the materialised W_V[kv(h)] W_O[h] (d_model × d_model) of every head."""
    v, o = _np(weights["W_V"]), _np(weights["W_O"])
    L, H, G = o.shape[0], o.shape[1], v.shape[1]
    mats = [v[layer, _kv_index(h, H, G)] @ o[layer, h] for layer in range(L) for h in range(H)]
    return _cos_matrix(np.stack([m.ravel() for m in mats]))


def _hsic_u(K: np.ndarray, Lm: np.ndarray) -> float:
    """Unbiased HSIC of Song et al. 2012, written out as in the paper."""
    n = K.shape[0]
    Kt, Lt = K.copy(), Lm.copy()
    np.fill_diagonal(Kt, 0.0)
    np.fill_diagonal(Lt, 0.0)
    one = np.ones(n)
    term1 = np.trace(Kt @ Lt)
    term2 = (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
    term3 = 2.0 / (n - 2) * (one @ Kt @ Lt @ one)
    return (term1 + term2 - term3) / (n * (n - 3))


def _cka_ref(X: np.ndarray, Y: np.ndarray) -> float:
    """Debiased linear CKA from the unbiased HSIC."""
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    K, Lm = X @ X.T, Y @ Y.T
    return _hsic_u(K, Lm) / math.sqrt(_hsic_u(K, K) * _hsic_u(Lm, Lm))


def _biased_cka(X: np.ndarray, Y: np.ndarray) -> float:
    """Kornblith's plain linear CKA on token-centred outputs (the biased estimator)."""
    X = np.asarray(X, np.float64) - np.mean(X, 0)
    Y = np.asarray(Y, np.float64) - np.mean(Y, 0)
    return np.linalg.norm(Y.T @ X) ** 2 / (np.linalg.norm(X.T @ X) * np.linalg.norm(Y.T @ Y))


def _random_weights(rng, L=2, H=4, G=None, d=12, d_k=4, d_v=None):
    G = H if G is None else G
    d_v = d_k if d_v is None else d_v
    return {
        "W_Q": rng.standard_normal((L, H, d, d_k)),
        "W_K": rng.standard_normal((L, G, d, d_k)),
        "W_V": rng.standard_normal((L, G, d, d_v)),
        "W_O": rng.standard_normal((L, H, d_v, d)),
    }


def _run_with_outputs(z: np.ndarray, attentions: np.ndarray | None = None) -> AttentionRun:
    """A hand-built run carrying head outputs z (L, H, n, d_v); uniform attention unless given."""
    L, H, n, _ = z.shape
    if attentions is None:
        attentions = np.full((L, H, n, n), 1.0 / n)
    return AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=np.asarray(attentions, np.float32),
                        head_outputs=np.asarray(z, np.float32))


def _random_orthogonal(rng, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _random_run(rng, L, H, n) -> AttentionRun:
    a = rng.random((L, H, n, n)) ** 3 + 1e-3
    a /= a.sum(-1, keepdims=True)
    return AttentionRun.from_array(a, [f"t{i}" for i in range(n)])


# --- 1. independent values --------------------------------------------------------------------

def test_qk_and_ov_match_materialised_products():
    """QK / OV cosines equal the cosines of the materialised W_Q W_Kᵀ and W_V W_O (float64)."""
    rng = np.random.default_rng(1)
    weights = _random_weights(rng, L=2, H=3, d=10, d_k=4, d_v=5)
    run = _random_run(rng, 2, 3, 7)
    qk = metrics.head_similarity(run, "qk", weights=weights)
    ov = metrics.head_similarity(run, "ov", weights=weights)
    assert qk.shape == ov.shape == (6, 6)
    np.testing.assert_allclose(qk, _qk_ref(weights), atol=1e-5)
    np.testing.assert_allclose(ov, _ov_ref(weights), atol=1e-5)
    # torch tensors give the same answer as numpy arrays
    as_torch = {k: torch.from_numpy(v).float() for k, v in weights.items()}
    np.testing.assert_allclose(metrics.head_similarity(run, "qk", weights=as_torch), qk, atol=1e-6)
    # the values are not trivially 0 or 1 off the diagonal
    off = ~np.eye(6, dtype=bool)
    assert np.abs(qk[off]).max() < 0.99 and np.abs(qk[off]).max() > 1e-3


def test_cka_matches_song_unbiased_hsic():
    """Output CKA equals debiased linear CKA from Song et al.'s unbiased HSIC formula."""
    rng = np.random.default_rng(2)
    L, H, n, d_v = 2, 3, 7, 4
    z = rng.standard_normal((L, H, n, d_v))
    z[1, 2] = z[0, 0] @ rng.standard_normal((d_v, d_v)) + 0.3 * rng.standard_normal((n, d_v))  # related
    z = z.astype(np.float32)
    cka = metrics.head_similarity(_run_with_outputs(z), "cka")
    flat = z.reshape(L * H, n, d_v)
    ref = np.array([[_cka_ref(flat[i], flat[j]) for j in range(L * H)] for i in range(L * H)])
    np.testing.assert_allclose(cka, ref, atol=1e-5)
    np.testing.assert_allclose(np.diag(cka), 1.0, atol=1e-6)


def test_residual_correlation_matches_corrcoef():
    """Residual correlation equals np.corrcoef of o_h = z_h W_O[h] centred per coordinate, flattened."""
    rng = np.random.default_rng(3)
    L, H, n, d_v, d = 2, 3, 7, 4, 9
    weights = _random_weights(rng, L=L, H=H, d=d, d_k=d_v)
    z = (rng.standard_normal((L, H, n, d_v)) + rng.standard_normal((L, H, 1, d_v))).astype(np.float32)
    res = metrics.head_similarity(_run_with_outputs(z), "residual", weights=weights)
    o = np.einsum("lhtv,lhvd->lhtd", z.astype(np.float64), weights["W_O"]).reshape(L * H, n, d)
    centred = (o - o.mean(1, keepdims=True)).reshape(L * H, -1)
    np.testing.assert_allclose(res, np.corrcoef(centred), atol=1e-5)


def test_seed_r_matches_direct_products():
    """Seed's R_ij equals ‖z_i z_jᵀ‖_F / (‖z_i‖_F ‖z_j‖_F) computed with explicit matrix products."""
    rng = np.random.default_rng(4)
    L, H, n, d_v = 2, 4, 7, 4
    z = rng.standard_normal((L, H, n, d_v)).astype(np.float32)
    r = metrics.head_similarity(_run_with_outputs(z), "seed_r")
    flat = z.reshape(L * H, n, d_v).astype(np.float64)
    ref = np.array([[np.linalg.norm(flat[i] @ flat[j].T) / (np.linalg.norm(flat[i]) * np.linalg.norm(flat[j]))
                     for j in range(L * H)] for i in range(L * H)])
    np.testing.assert_allclose(r, ref, atol=1e-5)


def test_missing_inputs_raise():
    """Weight-based kinds without weights and output-based kinds without z raise ValueError."""
    rng = np.random.default_rng(5)
    run = _random_run(rng, 1, 2, 4)
    for kind in ("qk", "ov", "residual"):
        with pytest.raises(ValueError, match="weights"):
            metrics.head_similarity(run, kind)
    for kind in ("cka", "seed_r"):
        with pytest.raises(ValueError, match="output"):
            metrics.head_similarity(run, kind)
    with pytest.raises(ValueError):
        metrics.head_output_norms(run, _random_weights(rng, L=1, H=2))


# --- 2. QK invariance -------------------------------------------------------------------------

@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), H=st.sampled_from([2, 3, 4]), gqa=st.booleans())
def test_qk_cosine_invariant_to_reparametrisation(seed, H, gqa):
    """W_Q→W_Q R, W_K→W_K R⁻ᵀ (R shared within a KV group) leaves the QK cosine unchanged; raw W_Q cosine moves."""
    rng = np.random.default_rng(seed)
    G = (1 if H == 3 else 2) if gqa else H
    L, d, d_k = 2, 8, 4
    weights = _random_weights(rng, L=L, H=H, G=G, d=d, d_k=d_k)
    new = {k: v.copy() for k, v in weights.items()}
    for layer in range(L):
        for g in range(G):
            R = _random_orthogonal(rng, d_k) @ np.diag(rng.uniform(0.5, 2.0, d_k))
            new["W_K"][layer, g] = weights["W_K"][layer, g] @ np.linalg.inv(R).T
            for h in range(H):
                if _kv_index(h, H, G) == g:
                    new["W_Q"][layer, h] = weights["W_Q"][layer, h] @ R
    run = _random_run(rng, L, H, 4)
    before = metrics.head_similarity(run, "qk", weights=weights)
    after = metrics.head_similarity(run, "qk", weights=new)
    np.testing.assert_allclose(after, before, atol=1e-5)
    np.testing.assert_allclose(before, _qk_ref(weights), atol=1e-5)
    # the seed's cosine of the raw W_Q is not a property of the attention function
    raw_before = _cos_matrix(weights["W_Q"].reshape(L * H, -1))
    raw_after = _cos_matrix(new["W_Q"].reshape(L * H, -1))
    assert np.abs(raw_after - raw_before).max() > 1e-3


# --- 3. grouped-query attention ---------------------------------------------------------------

def test_gqa_qk_ov_use_the_groups_kv_head():
    """With H=4, G=2, query head h reads KV head h // 2: QK/OV match materialised per-head products."""
    rng = np.random.default_rng(6)
    L, H, G = 2, 4, 2
    weights = _random_weights(rng, L=L, H=H, G=G, d=12, d_k=4)
    run = _random_run(rng, L, H, 5)
    qk = metrics.head_similarity(run, "qk", weights=weights)
    ov = metrics.head_similarity(run, "ov", weights=weights)
    np.testing.assert_allclose(qk, _qk_ref(weights), atol=1e-5)
    np.testing.assert_allclose(ov, _ov_ref(weights), atol=1e-5)
    # the other plausible grouping (h % G, interleaved) gives a different matrix: the test can tell
    interleaved = dict(weights, W_K=weights["W_K"][:, [0, 1, 0, 1]])  # as if G = H, head h reads h % 2
    assert np.abs(_qk_ref(interleaved) - qk).max() > 1e-2


def test_gqa_identical_queries_in_a_group_have_qk_cosine_one():
    """Two query heads of one KV group with identical W_Q get QK cosine 1; different W_Q, not 1."""
    rng = np.random.default_rng(7)
    L, H, G = 1, 4, 2
    weights = _random_weights(rng, L=L, H=H, G=G, d=12, d_k=4)
    weights["W_Q"][0, 1] = weights["W_Q"][0, 0]  # heads 0, 1 share KV head 0
    weights["W_Q"][0, 2] = weights["W_Q"][0, 0]  # head 2 reads KV head 1: same W_Q, other W_K
    run = _random_run(rng, L, H, 5)
    qk = metrics.head_similarity(run, "qk", weights=weights)
    assert qk[0, 1] == pytest.approx(1.0, abs=1e-6)
    assert qk[0, 2] < 0.99  # same W_Q but a different W_K
    assert qk[2, 3] < 0.99  # same W_K but a different W_Q
    ov = metrics.head_similarity(run, "ov", weights=weights)
    assert ov[0, 1] < 0.99  # same W_V, different W_O


# --- 4. CKA -----------------------------------------------------------------------------------

def test_cka_invariances_and_small_n():
    """Debiased CKA is 1 for identical, rotated, rescaled (and shifted) copies; NaN for n < 4."""
    rng = np.random.default_rng(8)
    n, d = 20, 6
    x = rng.standard_normal((n, d))
    Q = _random_orthogonal(rng, d)
    other = rng.standard_normal((n, d))
    z = np.stack([x, x, x @ Q, 3.7 * x, 0.01 * x @ Q, x + rng.standard_normal(d) * 5, other])[None]
    cka = metrics.head_similarity(_run_with_outputs(z), "cka")
    np.testing.assert_allclose(cka[0, :6], 1.0, atol=1e-6)
    assert abs(cka[0, 6]) < 0.9
    assert cka[0, 6] == pytest.approx(_cka_ref(x, other), abs=1e-5)
    tiny = metrics.head_similarity(_run_with_outputs(rng.standard_normal((1, 2, 3, 4))), "cka")
    assert np.isnan(tiny).all()


def test_debiased_cka_near_zero_for_independent_outputs():
    """Independent random outputs: debiased CKA ≈ 0, while the biased CKA is clearly positive."""
    rng = np.random.default_rng(9)
    H, n, d = 6, 64, 16
    z = rng.standard_normal((1, H, n, d))
    cka = metrics.head_similarity(_run_with_outputs(z), "cka")
    off = ~np.eye(H, dtype=bool)
    biased = np.array([[_biased_cka(z[0, i], z[0, j]) for j in range(H)] for i in range(H)])
    assert np.abs(cka[off]).max() < 0.1
    assert biased[off].min() > 0.1
    assert biased[off].mean() > 4 * np.abs(cka[off]).mean()
    # and with n = 200, d = 8 as well
    z2 = rng.standard_normal((1, 2, 200, 8))
    assert abs(metrics.head_similarity(_run_with_outputs(z2), "cka")[0, 1]) < 0.1


# --- 5. residual / 6. seed R ------------------------------------------------------------------

@pytest.mark.parametrize("c,expected", [(2.5, 1.0), (0.1, 1.0), (-0.7, -1.0)])
def test_residual_correlation_sign_of_scaled_copy(c, expected):
    """o_j = c·o_i (via W_O[j] = c·W_O[i], same z) gives residual correlation sign(c)."""
    rng = np.random.default_rng(10)
    n, d_v, d = 7, 4, 8
    weights = _random_weights(rng, L=1, H=3, d=d, d_k=d_v)
    weights["W_O"][0, 1] = c * weights["W_O"][0, 0]
    z = rng.standard_normal((1, 3, n, d_v))
    z[0, 1] = z[0, 0]
    res = metrics.head_similarity(_run_with_outputs(z), "residual", weights=weights)
    assert res[0, 1] == pytest.approx(expected, abs=1e-6)
    assert abs(res[0, 2]) < 0.99


def test_seed_r_identical_random_heads_is_not_one():
    """The seed's R for two identical random heads (n = d_v = 64) is about 0.18, not 1."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 64))
    z = np.stack([x, x])[None]
    r = metrics.head_similarity(_run_with_outputs(z), "seed_r")
    assert 0.1 < r[0, 1] < 0.3
    expected = np.linalg.norm(x @ x.T) / np.linalg.norm(x) ** 2
    assert r[0, 1] == pytest.approx(expected, abs=1e-5)
    assert metrics.head_similarity(_run_with_outputs(z), "cka")[0, 1] == pytest.approx(1.0, abs=1e-6)


# --- 7. importance ----------------------------------------------------------------------------

def test_importance_zero_head_and_zero_mean_head():
    """Zero W_O slice → both norms 0; zero-mean z → mean-output norm ≈ 0 but output norm > 0; values direct."""
    rng = np.random.default_rng(12)
    L, H, n, d_v, d = 2, 3, 6, 4, 8
    weights = _random_weights(rng, L=L, H=H, d=d, d_k=d_v)
    weights["W_O"][1, 2] = 0.0
    z = rng.standard_normal((L, H, n, d_v)) + 1.5
    half = rng.standard_normal((n // 2, d_v)) + 2.0
    z[0, 1] = np.concatenate([half, -half])  # mean over tokens exactly 0
    z = z.astype(np.float32)
    run = _run_with_outputs(z)
    imp = metrics.head_output_norms(run, weights)
    o = np.einsum("lhtv,lhvd->lhtd", z.astype(np.float64), weights["W_O"])
    expected_norm = np.linalg.norm(o, axis=-1).mean(-1)
    expected_mean = np.linalg.norm(o.mean(2), axis=-1)
    assert imp["output_norm"].shape == imp["mean_output_norm"].shape == (L, H)
    np.testing.assert_allclose(imp["output_norm"], expected_norm, rtol=1e-5)
    np.testing.assert_allclose(imp["mean_output_norm"], expected_mean, rtol=1e-5, atol=1e-5)
    assert imp["output_norm"][1, 2] == 0.0 and imp["mean_output_norm"][1, 2] == 0.0
    assert imp["mean_output_norm"][0, 1] < 1e-5 and imp["output_norm"][0, 1] > 1.0
    # head_table carries the same two columns, in (layer, head) order
    table = metrics.head_table(run, weights)
    np.testing.assert_allclose(table["output_norm"].to_numpy(), imp["output_norm"].ravel())
    np.testing.assert_allclose(table["mean_output_norm"].to_numpy(), imp["mean_output_norm"].ravel())
    assert list(zip(table["layer"], table["head"]))[4] == (1, 1)
    assert "output_norm" not in metrics.head_table(run).columns


# --- 8. diversity -----------------------------------------------------------------------------

S = np.array([[1.0, 0.8, 0.1, -0.2],
              [0.8, 1.0, 0.3, 0.4],
              [0.1, 0.3, 1.0, -0.6],
              [-0.2, 0.4, -0.6, 1.0]])


def test_diversity_by_hand():
    """D and per-layer D on a 2 layer × 2 head similarity: 0.6 overall, 0.2 and 0.4 per layer."""
    assert metrics.diversity(S) == pytest.approx((0.2 + 0.9 + 0.8 + 0.7 + 0.6 + 0.4) * 2 / 12)
    np.testing.assert_allclose(metrics.layer_diversity(S, 2, 2), [0.2, 0.4])
    assert math.isnan(metrics.diversity(np.ones((1, 1))))
    table = metrics.diversity_table(S, np.eye(4), 2, 2)
    assert table["heads"].tolist() == ["layer 0", "layer 1", "all heads"]
    np.testing.assert_allclose(table["D"], [0.2, 0.4, 0.6])
    np.testing.assert_allclose(table["D_random_init"], [1.0, 1.0, 1.0])
    assert "D_random_init" not in metrics.diversity_table(S, None, 2, 2).columns


def test_similarity_and_dissimilarity_conversions():
    """as_similarity maps JS 0 → 1 and ln 2 → 0; as_dissimilarity gives 1 − |s| (symmetric, zero diagonal)."""
    js = np.array([[0.0, math.log(2)], [math.log(2), 0.0]])
    np.testing.assert_allclose(metrics.as_similarity(js, "js"), [[1.0, 0.0], [0.0, 1.0]], atol=1e-12)
    np.testing.assert_allclose(metrics.as_similarity(S, "cka"), S)
    np.testing.assert_allclose(metrics.as_dissimilarity(js, "js"), js)
    d = metrics.as_dissimilarity(S, "qk")
    np.testing.assert_allclose(d, 1 - np.abs(S), atol=1e-12)
    with_nan = S.copy()
    with_nan[0, 1] = with_nan[1, 0] = np.nan
    assert metrics.as_dissimilarity(with_nan, "cka")[0, 1] == 1.0


# --- 9. rollout through a head ------------------------------------------------------------------

def _rollout_ref(a: np.ndarray) -> np.ndarray:
    L, _, n, _ = a.shape
    out, acc = [], np.eye(n)
    for layer in range(L):
        hat = 0.5 * a[layer].mean(0) + 0.5 * np.eye(n)
        hat /= hat.sum(-1, keepdims=True)
        acc = hat @ acc
        out.append(acc)
    return np.stack(out)


def test_rollout_through_head():
    """Layer 0 is A[0, h]; layer l is A[l, h] @ R_{l−1} with R the rollout; rows sum to 1."""
    rng = np.random.default_rng(13)
    run = _random_run(rng, 3, 2, 5)
    a = run.attentions.astype(np.float64)
    R = _rollout_ref(a)
    np.testing.assert_allclose(metrics.rollout(run), R, atol=1e-6)
    np.testing.assert_allclose(metrics.rollout_through_head(run, 0, 1), a[0, 1], atol=1e-7)
    for layer in (1, 2):
        for head in (0, 1):
            got = metrics.rollout_through_head(run, layer, head)
            np.testing.assert_allclose(got, a[layer, head] @ R[layer - 1], atol=1e-6)
            np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-6)


# --- 10. flow ---------------------------------------------------------------------------------

def test_flow_identity_and_by_hand():
    """Identity attention → identity flow; all-to-token-0 on 2 tokens: [[1,0],[.5,.5]] after 1 layer,
    [[1,0],[2/3,1/3]] after 2."""
    eye = np.eye(4)[None, None].repeat(3, 0).repeat(2, 1)
    np.testing.assert_allclose(metrics.flow(AttentionRun.from_array(eye, list("abcd"))), np.eye(4), atol=1e-6)
    first = np.array([[1.0, 0.0], [1.0, 0.0]])
    one = AttentionRun.from_array(first[None, None], ["a", "b"])
    np.testing.assert_allclose(metrics.flow(one), [[1.0, 0.0], [0.5, 0.5]], atol=1e-6)
    two = AttentionRun.from_array(np.stack([first, first])[:, None], ["a", "b"])
    # token 1 after layer 2 reaches input 0 by two edge-disjoint paths of capacity 0.5 (flow 1)
    # and input 1 by one path of capacity 0.5; rows normalised: [2/3, 1/3] (rollout says [3/4, 1/4])
    np.testing.assert_allclose(metrics.flow(two), [[1.0, 0.0], [2 / 3, 1 / 3]], atol=1e-6)
    np.testing.assert_allclose(metrics.flow(two, layer=0), [[1.0, 0.0], [0.5, 0.5]], atol=1e-6)
    np.testing.assert_allclose(metrics.rollout(two)[1], [[1.0, 0.0], [0.75, 0.25]], atol=1e-7)  # float32


def test_flow_rows_sum_to_one_and_one_layer_equals_rollout():
    """On random runs flow rows sum to 1; with one layer flow equals Â, i.e. rollout."""
    rng = np.random.default_rng(14)
    run = _random_run(rng, 1, 3, 5)
    f = metrics.flow(run)
    np.testing.assert_allclose(f.sum(-1), 1.0, atol=1e-9)
    np.testing.assert_allclose(f, metrics.rollout(run)[0], atol=1e-5)
    deeper = _random_run(rng, 3, 2, 5)
    np.testing.assert_allclose(metrics.flow(deeper).sum(-1), 1.0, atol=1e-9)


def test_flow_refuses_long_inputs():
    """n > FLOW_MAX_TOKENS (64) raises ValueError pointing to rollout."""
    n = metrics.FLOW_MAX_TOKENS + 1
    run = AttentionRun.from_array(np.eye(n)[None, None], [f"t{i}" for i in range(n)])
    with pytest.raises(ValueError, match="rollout"):
        metrics.flow(run)


# --- 11. layouts ------------------------------------------------------------------------------

def test_cluster_order_keeps_planted_clusters_contiguous():
    """Two planted clusters of identical heads, interleaved, come out as two contiguous blocks."""
    n = 6
    diag, first = np.eye(n), np.zeros((n, n))
    first[:, 0] = 1
    heads = [diag, first] * 4  # cluster A at even indices, B at odd
    run = AttentionRun.from_array(np.stack(heads)[None], [f"t{i}" for i in range(n)])
    d = metrics.as_dissimilarity(metrics.head_similarity(run, "js"), "js")
    order = metrics.cluster_order(d)
    assert sorted(order.tolist()) == list(range(8))
    labels = [int(i) % 2 for i in order]
    assert labels in ([0] * 4 + [1] * 4, [1] * 4 + [0] * 4)


def test_mds_reproduces_planar_distances():
    """MDS of the distance matrix of 2-D points reproduces the distances (max error < 1e-3)."""
    rng = np.random.default_rng(15)
    pts = rng.standard_normal((12, 2)) * 3
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    X = metrics.mds(d)
    assert X.shape == (12, 2)
    got = np.linalg.norm(X[:, None] - X[None], axis=-1)
    assert np.abs(got - d).max() < 1e-3


def test_mds_separates_planted_clusters_the_same_way_every_time():
    """Two groups of heads close within (0.1) and far apart (1.0) lie apart on the map: every
    cross-group distance exceeds every within-group one; the map is centred and deterministic."""
    rng = np.random.default_rng(16)
    group = np.repeat([0, 1], 10)
    d = np.where(group[:, None] == group[None], 0.1, 1.0) + rng.uniform(0, 0.02, (20, 20))
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    X = metrics.mds(d)
    assert X.shape == (20, 2)
    np.testing.assert_allclose(X.mean(0), 0.0, atol=1e-12)
    dist = np.linalg.norm(X[:, None] - X[None], axis=-1)
    same = group[:, None] == group[None]
    assert dist[~same].min() > dist[same].max()
    np.testing.assert_array_equal(X, metrics.mds(d))


def test_cka_exact_when_outputs_have_a_large_constant_part():
    """A constant shift (1000× the spread) changes neither the true CKA nor ours (float32 safe)."""
    rng = np.random.default_rng(7)
    z = rng.normal(size=(1, 2, 64, 16))
    shifted = z + 1000.0 * rng.normal(size=(1, 1, 1, 16))
    got = metrics.head_similarity(_run_with_outputs(shifted), "cka")[0, 1]
    assert got == pytest.approx(_cka_ref(z[0, 0], z[0, 1]), abs=1e-5)


def test_dead_head_is_like_no_other_and_undefined_to_itself():
    """A head whose W_O slice is 0 writes nothing: OV cosine 0 to others, NaN to itself."""
    rng = np.random.default_rng(8)
    w = _random_weights(rng, L=1, H=3)
    w["W_O"] = np.array(w["W_O"])
    w["W_O"][0, 1] = 0.0
    run = _run_with_outputs(rng.normal(size=(1, 3, 6, w["W_O"].shape[2])))
    ov = metrics.head_similarity(run, "ov", weights=w)
    assert np.isnan(ov[1, 1]) and ov[1, 0] == 0.0 and ov[0, 1] == 0.0
    assert ov[0, 0] == pytest.approx(1.0) and ov[2, 2] == pytest.approx(1.0)
    d = metrics.diversity(ov)  # the undefined diagonal does not enter D
    assert np.isfinite(d)


def test_selected_heads_compare_as_in_the_whole_model():
    """select_heads keeps every pairwise value of the picked heads (GQA groups included)."""
    rng = np.random.default_rng(9)
    L, H, G, n = 2, 4, 2, 9
    w = _random_weights(rng, L=L, H=H, G=G)
    run = _run_with_outputs(rng.standard_normal((L, H, n, 4)), _random_run(rng, L, H, n).attentions)
    run.num_kv_heads = G
    idx = [1, 2, 6, 7]  # heads of both layers and both KV groups
    sub, sub_w = metrics.select_heads(run, idx, w)
    assert sub.attentions.shape == (1, 4, n, n) and sub.num_kv_heads == 4
    for kind in metrics.SIMILARITIES:
        whole = metrics.head_similarity(run, kind, weights=w)[np.ix_(idx, idx)]
        np.testing.assert_allclose(metrics.head_similarity(sub, kind, weights=sub_w), whole, atol=1e-6)
