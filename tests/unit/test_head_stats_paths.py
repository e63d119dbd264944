"""The two backends `head_stats.pattern_stats` computes the head table's statistics by, the compiled
pass over every head (the CPU's) and tensor operations on chunks of heads and rows (any
device's), agree: every column within 1e-6 and the same pattern classes (up to the heads whose
statistics lie within 1e-6 of a rule's threshold), on random and planted runs (causal, two segments,
special tokens and punctuation, empty rows, a head with no attention at all, n = 1 and 2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_viz.capture.run import AttentionRun
from mha_viz.metrics import head_stats
from mha_viz.metrics.head_stats import RULE_INPUTS, classify, pattern_stats
from tests.tolerance import assert_same_class


def _labels(stats: dict) -> list[str]:
    return [classify(dict(zip(RULE_INPUTS, values))) for values in zip(*(stats[k].ravel().tolist()
                                                                          for k in RULE_INPUTS))]


def _assert_paths_agree(run: AttentionRun) -> dict:
    one = pattern_stats(run, compiled=True)
    many = pattern_stats(run, compiled=False)
    assert one.keys() == many.keys()
    for name in one:
        assert one[name].shape == many[name].shape == (run.num_layers, run.num_heads), name
        assert one[name].dtype == many[name].dtype == np.float64, name
        np.testing.assert_allclose(many[name], one[name], rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=name)
    inputs = {k: one[k] for k in RULE_INPUTS}
    assert_same_class(_labels(one), _labels(many), inputs, classify,
                      {k: 1e-6 + 1e-6 * np.abs(v) for k, v in inputs.items()}, "compiled against tensor")
    return many


def _random(rng, L, H, n, causal, power=4.0) -> np.ndarray:
    a = rng.random((L, H, n, n)) ** power
    if causal:
        a = np.tril(a)
    return (a / a.sum(-1, keepdims=True)).astype(np.float32)


def _tokens(rng, n, two_segments=False) -> tuple[list[str], list[bool]]:
    """[CLS] words and punctuation [SEP] (… [SEP] for two segments), words from a small
    vocabulary so that duplicates (and induction targets) occur."""
    words = [str(w) for w in rng.choice(["a", "b", "c", ".", ","], size=n)]
    if n >= 2:
        words[0], words[-1] = "[CLS]", "[SEP]"
    if two_segments and n >= 4:
        words[n // 2] = "[SEP]"
    return words, [w.startswith("[") for w in words]


@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 3), H=st.integers(1, 4), n=st.integers(1, 14), causal=st.booleans(),
       two=st.booleans(), empty=st.sampled_from(["none", "rows", "head"]), seed=st.integers(0, 2**16),
       learned=st.booleans(), sink=st.floats(0.0, 50.0))
def test_paths_agree_on_random_runs(L, H, n, causal, two, empty, seed, learned, sink):
    """learned: rows keeping 0.05 … 1 (a learned sink took the rest); sink: weight added on the first key
    before normalising (a sink head, whose rows keep little beyond it)."""
    rng = np.random.default_rng(seed)
    a = _random(rng, L, H, n, causal, power=float(rng.choice([1.0, 4.0, 12.0])))
    a[..., 0] += sink * rng.random((L, H, 1)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    if learned:
        a *= rng.uniform(0.05, 1.0, (L, H, n, 1)).astype(np.float32)
    if empty == "rows":  # rows left empty after hiding tokens
        a[..., rng.random(n) < 0.3, :] = 0.0
    elif empty == "head":
        a[rng.integers(L), rng.integers(H)] = 0.0
    tokens, special = _tokens(rng, n, two)
    _assert_paths_agree(AttentionRun(tokens=tokens, attentions=a, is_causal=causal, special_mask=special))


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_paths_agree_on_the_shortest_runs(n, causal):
    rng = np.random.default_rng(n)
    tokens, special = _tokens(rng, n)
    run = AttentionRun(tokens=tokens, attentions=_random(rng, 2, 3, n, causal), is_causal=causal,
                       special_mask=special)
    stats = _assert_paths_agree(run)
    assert np.isnan(stats["norm_entropy"]).all() == (n == 1)


def test_paths_agree_on_planted_patterns():
    """Identity, previous token, all-to-first, all-to-[SEP], uniform, block and induction heads
    and a head with no attention left: each path gives each its class, in one segment and two. The
    all-to-first head is a sink; so is the induction head, whose 7 of 9 rows rest on the first token
    (beyond it, its two looking-up rows have no clear type)."""
    tokens = ["[CLS]", "x", "y", ".", "z", "x", "y", ",", "[SEP]"]
    n = len(tokens)
    seg = np.array([0] * 5 + [1] * 4)
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0
    first = np.zeros((n, n))
    first[:, 0] = 1.0
    to_sep = np.zeros((n, n))
    to_sep[:, -1] = 1.0
    block = (seg[:, None] == seg[None, :]).astype(float)
    induction = np.zeros((n, n))
    induction[5, 2] = induction[6, 3] = 1.0  # x, y repeated: attend to the token after the earlier copy
    induction[[i for i in range(n) if not induction[i].any()], 0] = 1.0
    heads = np.stack([np.eye(n), prev, first, to_sep, np.ones((n, n)), block, induction, np.zeros((n, n))])
    heads[:-1] /= heads[:-1].sum(-1, keepdims=True)
    run = AttentionRun(tokens=tokens, attentions=heads[None].astype(np.float32),
                       special_mask=[t.startswith("[") for t in tokens])
    stats = _assert_paths_agree(run)
    assert _labels(stats) == ["diagonal:self", "diagonal:prev", "sink", "vertical:sep", "broad",
                              "heterogeneous", "sink", "heterogeneous"]
    for name in ("prev_token_score", "duplicate_score", "induction_score"):
        assert stats[name][0, -1] == 0.0  # the empty head: no division by its zero total
    assert stats["prev_token_score"][0, 1] > 0.85 and stats["induction_score"][0, 6] > 0.2
    two = ["[CLS]", "x", "y", ".", "[SEP]", "x", "y", ",", "[SEP]"]  # segments 0-4 and 5-8
    stats = _assert_paths_agree(AttentionRun(tokens=two, attentions=run.attentions,
                                             special_mask=[t.startswith("[") for t in two]))
    labels = _labels(stats)
    assert labels[0] == labels[5] == "block" and labels[2] == "sink"
    assert stats["in_segment"][0, 5] == 1.0 and stats["in_segment"][0, 2] == 0.0


def test_paths_agree_on_a_run_with_hidden_tokens():
    rng = np.random.default_rng(7)
    tokens, special = _tokens(rng, 12, two_segments=True)
    run = AttentionRun(tokens=tokens, attentions=_random(rng, 2, 3, 12, True, power=12.0), is_causal=True,
                       special_mask=special)
    hidden = run.drop_tokens(np.array([t in (".", ",") or i == 0 for i, t in enumerate(tokens)]))
    _assert_paths_agree(hidden)


@pytest.mark.parametrize("chunk_bytes", [1, 4 * 10 * 10 * 5])
def test_chunks_of_heads_give_the_same_statistics(monkeypatch, chunk_bytes):
    """Chunks of one head a row at a time and of five heads (of 12) give what one chunk of every head gives
    (within float64 rounding: the rows add up in another order)."""
    rng = np.random.default_rng(3)
    tokens, special = _tokens(rng, 10, two_segments=True)
    run = AttentionRun(tokens=tokens, attentions=_random(rng, 3, 4, 10, False), special_mask=special)
    whole = pattern_stats(run, compiled=False)
    monkeypatch.setattr(head_stats, "CHUNK_BYTES", chunk_bytes)
    chunked = pattern_stats(run, compiled=False)
    for name in whole:
        np.testing.assert_allclose(chunked[name], whole[name], rtol=1e-12, atol=1e-15, err_msg=name)
    _assert_paths_agree(run)


def test_the_cpu_takes_the_compiled_pass_by_default():
    rng = np.random.default_rng(5)
    run = AttentionRun(tokens=list("abcd"), attentions=_random(rng, 1, 2, 4, False))
    default, compiled = pattern_stats(run), pattern_stats(run, compiled=True)
    for name in default:
        np.testing.assert_array_equal(default[name], compiled[name], err_msg=name)


def test_compiled_pass_by_hand():
    """One 3-token head written out: entropy of the smoothed rows, diagonals, distance, masses."""
    a = np.array([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.25, 0.25, 0.5]])
    run = AttentionRun(tokens=["[CLS]", ".", "[SEP]"], attentions=a[None, None].astype(np.float32),
                       special_mask=[True, False, True])
    stats = pattern_stats(run, compiled=True)
    smooth = 0.9999 * a + 0.0001 / 3
    rows = -(smooth * np.log(smooth)).sum(1)
    expect = {"entropy": rows.mean(), "norm_entropy": (rows / np.log(3)).mean(), "confidence": (0.5 + 1 + 0.5) / 3,
              "distance": (0.5 * 1 + 0 + 0.25 * 2 + 0.25 * 1) / 3, "self": 2.0 / 3, "prev": 0.25 / 3, "next": 0.5 / 3,
              "first": 0.75 / 3, "sep": 0.5 / 3, "punct": (0.5 + 1 + 0.25) / 3, "prev_token_score": 0.25 / 3}
    for name, value in expect.items():
        assert stats[name][0, 0] == pytest.approx(value, rel=1e-6), name
