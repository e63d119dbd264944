"""Head metrics against hand computations on planted patterns (`docs/head-metrics.md`, section 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_viz import AttentionRun, metrics


def _run(*heads, tokens=None, causal=False, special=None):
    a = np.stack(heads)[None].astype(np.float32)  # (1, H, n, n)
    n = a.shape[-1]
    run = AttentionRun.from_array(a, tokens or [f"w{i}" for i in range(n)], is_causal=causal)
    if special is not None:
        run.special_mask = special
    return run


def _uniform(n, causal=False):
    a = np.tril(np.ones((n, n))) if causal else np.ones((n, n))
    return a / a.sum(-1, keepdims=True)


def _shift(n):
    a = np.eye(n, k=-1)
    a[0, 0] = 1.0
    return a


def test_identity_head():
    n = 5
    row = metrics.head_table(_run(np.eye(n))).iloc[0]
    big, eps = 0.9999 + 0.0001 / n, 0.0001 / n
    expected = -(big * math.log(big) + (n - 1) * eps * math.log(eps))
    # float32 arithmetic (as the app computes it): absolute error well under 1e-6 nats
    assert row.entropy == pytest.approx(expected, abs=1e-7)
    assert row.norm_entropy == pytest.approx(expected / math.log(n), abs=1e-7)
    assert (row.confidence, row.distance, row.self, row.prev) == (1.0, 0.0, 1.0, 0.0)
    assert row.pattern == "diagonal:self"


def test_previous_token_head():
    n = 6
    row = metrics.head_table(_run(_shift(n), causal=True)).iloc[0]
    assert row.prev == pytest.approx((n - 1) / n)
    assert row.prev_token_score == pytest.approx((n - 1) / n)
    assert row.distance == pytest.approx((n - 1) / n) and row.distance_norm == pytest.approx((n - 1) / n / n)
    assert row.pattern == "diagonal:prev"


def test_uniform_heads_bidirectional_and_causal():
    n = 8
    row = metrics.head_table(_run(_uniform(n))).iloc[0]
    assert row.entropy == pytest.approx(math.log(n), rel=1e-6)
    assert row.norm_entropy == pytest.approx(1.0, rel=1e-6)
    assert row.confidence == pytest.approx(1 / n)
    assert row.distance == pytest.approx(np.mean([sum(abs(i - j) for j in range(n)) / n for i in range(n)]))
    assert row.pattern == "broad"
    causal = metrics.head_table(_run(_uniform(n, causal=True), causal=True)).iloc[0]
    assert causal.entropy == pytest.approx(np.mean([math.log(i + 1) for i in range(n)]), rel=1e-5)
    assert causal.norm_entropy == pytest.approx(1.0, rel=1e-6)  # row 0 (one key) is skipped
    assert causal.pattern == "broad"


def test_all_to_first_and_sep_and_punct():
    n = 5
    first = np.zeros((n, n))
    first[:, 0] = 1
    to_sep = np.zeros((n, n))
    to_sep[:, -1] = 1
    to_dot = np.zeros((n, n))
    to_dot[:, 2] = 1
    tokens = ["[CLS]", "a", ".", "b", "[SEP]"]
    table = metrics.head_table(_run(first, to_sep, to_dot, tokens=tokens, special=[True, False, False, False, True]))
    assert table["first"].tolist() == [1.0, 0.0, 0.0]
    assert table["sep"].tolist() == [0.0, 1.0, 0.0]
    assert table["punct"].tolist() == [0.0, 0.0, 1.0]
    # all on the first token: the sink, and nothing beyond it (`vertical:first` before sinks were left out)
    assert table["pattern"].tolist() == ["sink", "vertical:sep", "vertical:punct"]
    assert table["sink"].tolist() == [1.0, 0.0, 0.0]


def test_block_pattern_for_two_segments():
    tokens = ["[CLS]", "a", "b", "[SEP]", "c", "d", "[SEP]"]
    seg = np.array([0, 0, 0, 0, 1, 1, 1])
    a = (seg[:, None] == seg[None, :]).astype(float)
    a /= a.sum(-1, keepdims=True)
    row = metrics.head_table(_run(a, tokens=tokens, special=[t.startswith("[") for t in tokens])).iloc[0]
    assert row.pattern == "block"


def _repeated(m, seed=0):
    rng = np.random.default_rng(seed)
    seq = rng.permutation(1000)[:m]
    return [f"t{t}" for t in np.concatenate([seq, seq])]


def test_perfect_induction_and_duplicate_heads_score_one_half():
    m = 10
    tokens = _repeated(m)
    n = 2 * m
    induction = np.zeros((n, n))
    duplicate = np.zeros((n, n))
    for i in range(n):
        if i < m:
            induction[i, i] = duplicate[i, i] = 1  # first half: nothing to look up
        else:
            induction[i, i - m + 1] = 1  # the token after the earlier copy
            duplicate[i, i - m] = 1  # the earlier copy itself
    table = metrics.head_table(_run(induction, duplicate, tokens=tokens, causal=True))
    assert table.loc[0, "induction_score"] == pytest.approx(0.5)
    assert table.loc[0, "duplicate_score"] == pytest.approx(0.0)
    assert table.loc[1, "duplicate_score"] == pytest.approx(0.5)
    assert table.loc[1, "induction_score"] == pytest.approx(0.0)


def test_similarity_identical_and_disjoint_heads():
    n = 6
    eye, shift = np.eye(n), np.roll(np.eye(n), 1, axis=1)
    run = _run(eye, eye, shift)
    js = metrics.head_similarity(run, "js")
    cos = metrics.head_similarity(run, "cosine")
    # identical heads: 0 up to the fast JS's error (its bound is 4e-5; here far below it)
    assert 0.0 <= js[0, 1] <= 1e-6 and cos[0, 1] == pytest.approx(1.0)
    # disjoint one-hot rows: ln 2 without smoothing; smoothing takes a little off
    assert 0.98 * math.log(2) < js[0, 2] < math.log(2)
    assert cos[0, 2] == pytest.approx(0.0)
    assert np.allclose(js, js.T) and np.allclose(np.diag(js), 0)
    with pytest.raises(ValueError, match="unknown"):
        metrics.head_similarity(run, "nope")


def test_diversity():
    assert metrics.diversity(np.ones((4, 4))) == 0.0
    assert metrics.diversity(np.eye(4)) == 1.0
    s = np.array([[1, -0.5], [-0.5, 1]])
    assert metrics.diversity(s) == pytest.approx(0.5)


def test_rollout_identity_and_one_layer_by_hand():
    n = 4
    ident = metrics.rollout(_run(np.eye(n), np.eye(n)))
    np.testing.assert_allclose(ident[0], np.eye(n))
    u = _uniform(n)
    one = metrics.rollout(_run(u, np.eye(n)))[0]
    expected = 0.5 * (0.5 * u + 0.5 * np.eye(n)) + 0.5 * np.eye(n)
    np.testing.assert_allclose(one, expected / expected.sum(-1, keepdims=True), rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(L=st.integers(1, 3), H=st.integers(1, 3), n=st.integers(1, 9), causal=st.booleans(), seed=st.integers(0, 99))
def test_property_ranges_symmetry_rollout(L, H, n, causal, seed):
    rng = np.random.default_rng(seed)
    a = rng.random((L, H, n, n)) ** 4
    if causal:
        a = np.tril(a) + np.eye(n) * 1e-3
    a /= a.sum(-1, keepdims=True)
    run = AttentionRun.from_array(a, [f"t{i % 3}" for i in range(n)], is_causal=causal)
    t = metrics.head_table(run)
    assert len(t) == L * H
    assert ((t.entropy >= -1e-9) & (t.entropy <= math.log(n) + 1e-9)).all()
    for col in ["confidence", "self", "prev", "next", "first", "prev_token_score", "duplicate_score",
                "induction_score"]:
        assert ((t[col] >= -1e-9) & (t[col] <= 1 + 1e-9)).all(), col
    js = metrics.head_similarity(run, "js")
    assert np.allclose(js, js.T) and (js >= 0).all() and (js <= math.log(2) + 1e-9).all()
    R = metrics.rollout(run)
    np.testing.assert_allclose(R.sum(-1), 1.0, atol=1e-6)  # float32 (`across_layers.DTYPE`): n ≤ 9 terms a row


def test_head_table_of_a_head_left_with_no_attention():
    """After hiding tokens, a head can keep no attention in any row (all zeros): its detector
    scores are 0, not a division by zero."""
    rng = np.random.default_rng(3)
    a = rng.random((1, 2, 5, 5)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    a[0, 1] = 0.0  # every row of head 1 empty
    run = AttentionRun(tokens=list("abcab"), attentions=a)
    table = metrics.head_table(run)
    empty = table[table["head"] == 1].iloc[0]
    assert empty["prev_token_score"] == 0 and empty["induction_score"] == 0
    assert table[table["head"] == 0]["prev_token_score"].iloc[0] > 0
