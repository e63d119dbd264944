"""drop_tokens on planted patterns: kept rows sum to 1, the hidden mass is the removed columns'
mass computed by hand, a causal sink head dropped does not divide by zero, metadata shrinks."""

import numpy as np
import pytest

import mha_viz
from mha_viz import AttentionRun
from mha_viz.capture import sinks


def _random_run(L=2, H=3, n=6, causal=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random((L, H, n, n)) + 0.05
    if causal:
        a = np.tril(a)
    a /= a.sum(-1, keepdims=True)
    toks = ["[CLS]", "the", "cat", "sat", "down", "[SEP]"][:n] if n <= 6 else [f"t{i}" for i in range(n)]
    run = AttentionRun.from_array(a, toks, is_causal=causal)
    run.special_mask = [t.startswith("[") for t in toks]
    run.token_ids = list(range(100, 100 + n))
    run.word_ids = [0, 1, 2, 2, 3, 4][:n] if n <= 6 else list(range(n))
    run.head_outputs = rng.random((L, H, n, 4)).astype(np.float32)
    return run, a


def test_kept_rows_sum_to_one_and_equal_hand_renormalisation():
    run, a = _random_run()
    mask = np.array([True, False, False, False, False, True])
    out = run.drop_tokens(mask)
    keep = [1, 2, 3, 4]
    by_hand = a[:, :, keep][:, :, :, keep]
    by_hand = by_hand / by_hand.sum(-1, keepdims=True)
    assert out.attentions.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(out.attentions.sum(-1), 1, atol=1e-6)
    np.testing.assert_allclose(out.attentions, by_hand, atol=1e-6)
    assert out.hidden.num_empty == 0
    assert run.attentions.shape == (2, 3, 6, 6)  # the original is untouched


def test_hidden_mass_is_the_removed_columns_mass():
    run, a = _random_run(seed=3)
    mask = np.array([True, False, False, True, False, False])
    out = mha_viz.capture.drop_tokens(run, mask)
    for layer in range(2):
        for head in range(3):
            rows = [1, 2, 4, 5]
            expected = np.mean([a[layer, head, q, 0] + a[layer, head, q, 3] for q in rows])
            assert out.hidden.mass[layer, head] == pytest.approx(expected, abs=1e-6)
    assert list(out.hidden.removed) == [0, 3] and list(out.hidden.kept) == [1, 2, 4, 5]


def test_metadata_shrinks_consistently():
    run, _ = _random_run()
    out = run.drop_tokens(sinks.hide_mask(run, special=True))
    assert out.tokens == ["the", "cat", "sat", "down"]
    assert out.token_ids == [101, 102, 103, 104]
    assert out.special_mask == [False] * 4
    assert out.word_ids == [1, 2, 2, 3]
    assert len(out.raw_tokens) == 4 and out.n == 4
    np.testing.assert_array_equal(out.head_outputs, run.head_outputs[:, :, 1:5])
    assert not out.truncated
    assert out.hidden.label == "renormalised without [CLS], [SEP]"
    assert out.hidden.removed_tokens == ("[CLS]", "[SEP]")


def test_causal_sink_dropped_reports_empty_rows_without_dividing_by_zero():
    n = 5
    a = np.zeros((1, 2, n, n))
    a[0, 0, :, 0] = 1.0  # head 0: a pure sink, every query looks at token 0 only
    a[0, 1] = np.tril(np.ones((n, n)))
    a[0, 1] /= a[0, 1].sum(-1, keepdims=True)  # head 1: uniform over the past
    a[0, 0, 3] = [0.5, 0.25, 0.25, 0, 0]  # query 3 of head 0 keeps some attention
    run = AttentionRun.from_array(a, list("abcde"), is_causal=True)
    with np.errstate(all="raise"):
        out = run.drop_tokens(sinks.hide_mask(run, first=True))
    assert np.isfinite(out.attentions).all()
    # head 0: queries b, c, e (new rows 0, 1, 3) had nothing but the sink: zeros, reported
    assert out.hidden.empty[0, 0].tolist() == [True, True, False, True]
    assert not out.hidden.empty[0, 1].any()
    assert out.hidden.num_empty == 3 and out.hidden.heads_with_empty_rows == 1
    np.testing.assert_array_equal(out.attentions[0, 0, [0, 1, 3]], 0)
    np.testing.assert_allclose(out.attentions[0, 0, 2], [0.5, 0.5, 0, 0])
    np.testing.assert_allclose(out.attentions[0, 1].sum(-1), 1, atol=1e-6)
    assert not np.triu(out.attentions, 1).any()  # still causal
    assert out.hidden.mass[0, 0] == pytest.approx((1 + 1 + 0.5 + 1) / 4)
    assert out.hidden.label == "renormalised without the first token (a)"


def test_bad_masks_are_refused_with_a_message():
    run, _ = _random_run()
    with pytest.raises(ValueError, match="every token"):
        run.drop_tokens(np.ones(6, dtype=bool))
    with pytest.raises(ValueError, match="6 booleans"):
        run.drop_tokens(np.ones(5, dtype=bool))


def test_empty_mask_keeps_everything():
    run, a = _random_run(causal=True)
    out = run.drop_tokens(np.zeros(6, dtype=bool))
    np.testing.assert_allclose(out.attentions, a, atol=1e-6)
    assert (out.hidden.mass == 0).all()


def test_head_table_stays_finite_on_empty_rows():
    from mha_viz import metrics
    n = 6
    a = np.zeros((1, 1, n, n))
    a[0, 0, :, 0] = 1.0
    a[0, 0, 4] = np.tril(np.ones(n))[4] / 5
    run = AttentionRun.from_array(a, list("abcdef"), is_causal=True).drop_tokens(np.eye(1, n, 0, dtype=bool)[0])
    table = metrics.head_table(run, None)
    numbers = table.select_dtypes("number").to_numpy(dtype=float)
    assert np.isfinite(numbers).all(), table.T


def test_similarity_and_rollout_stay_finite_on_empty_rows():
    from mha_viz import metrics
    n = 6
    a = np.zeros((2, 2, n, n))
    a[:, 0, :, 0] = 1.0  # sinks: every row of head 0 is left empty
    a[:, 1] = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    run = AttentionRun.from_array(a, list("abcdef"), is_causal=True).drop_tokens(np.eye(1, n, 0, dtype=bool)[0])
    assert run.hidden.empty[:, 0].all() and not run.hidden.empty[:, 1].any()
    assert np.isfinite(metrics.head_similarity(run, "js")).all()
    cos = metrics.head_similarity(run, "cosine")  # a head with no attention left has no direction
    live = [1, 3]  # index layer * H + head: the uniform heads
    assert np.isfinite(cos[np.ix_(live, live)]).all()
    assert np.isfinite(metrics.rollout(run)).all()
