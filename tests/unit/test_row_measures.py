"""The row measures' one definition (`mha_viz.metrics.row_measures`) and its two backends, the compiled pass
(`row_kernels.BlockSums`) and tensor operations (`row_stats.RowStats`), against a dense reference written here
from `docs/head-metrics.md`, section 1, one head and one row at a time in float64. Planted heads (itself, the
previous token, the first token, a repeated sequence's induction and duplicate heads, uniform, a two-segment
block, a sliding window, a learned sink) and random ones; causal and not; with the first key the sink and with
the first token hidden (no sink key); the whole matrix as one block, and cut into blocks of rows each holding
only the keys its rows may see (a window's block starts after key 0)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_viz.capture.run import AttentionRun
from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.head_stats import pattern_stats
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import STAT_NAMES, TextFacts, measures_from_sums
from mha_viz.metrics.row_stats import RowStats

EPS = ENTROPY_SMOOTHING
WINDOW = 3  # the sliding-window head's keys: i − WINDOW … i


def _entropy(p: np.ndarray, k: int) -> float:
    """−Σ p̂ ln p̂ with p̂ = (1 − ε)·p + ε/k over k keys."""
    q = (1 - EPS) * p + EPS / k
    return float(-(q * np.log(q)).sum())


def reference(A: np.ndarray, facts: TextFacts) -> dict[str, float]:
    """One head's measures, as the spec words them, one row at a time."""
    n, skip, A = facts.n, facts.skip, A.astype(np.float64)
    if not np.isfinite(A).all():
        return {name: np.nan for name in STAT_NAMES}
    rows = {key: [] for key in ("entropy", "norm", "conf", "dist", "self", "prev", "next", "first", "sep", "punct",
                                "sink")}
    kept = {key: [] for key in ("norm", "self", "prev", "next", "sep", "punct", "own")}
    for i in range(n):
        k = i + 1 if facts.causal else n  # keys 0 … k − 1 are visible (all n for an encoder)
        a = A[i, :k]
        h = _entropy(a, k)
        rows["entropy"].append(h)
        if k > 1:
            rows["norm"].append(h / np.log(k))
        rows["conf"].append(A[i].max())
        rows["dist"].append((A[i] * np.abs(i - np.arange(n))).sum())
        for name, j in (("self", i), ("prev", i - 1), ("next", i + 1)):
            rows[name].append(A[i, j] if 0 <= j < n else 0.0)
        rows["first"].append(A[i, 0])
        rows["sep"].append((A[i] * facts.mask("sep")).sum())
        rows["punct"].append((A[i] * facts.mask("punct")).sum())
        total = A[i].sum()
        rows["sink"].append((A[i, 0] if skip else 0.0) + (max(1 - total, 0.0) if total > 0 else 0.0))
        mass = a[skip:].sum()
        if i < skip or k - skip < CHOICE_KEYS or mass < EMPTY_BELOW:
            continue
        b = a[skip:] / mass  # the keys after the sink, renormalised: b[j − skip] for key j
        if k - skip > 1:
            kept["norm"].append(_entropy(b, k - skip) / np.log(k - skip))
        for name, j in (("self", i), ("prev", i - 1), ("next", i + 1)):
            kept[name].append(b[j - skip] if skip <= j < k else 0.0)
        kept["sep"].append((b * facts.mask("sep")[skip:k]).sum())
        kept["punct"].append((b * facts.mask("punct")[skip:k]).sum())
        if facts.seg is not None:
            kept["own"].append(b[facts.seg[skip:k] == facts.seg[i]].sum())
    out = {"entropy": np.mean(rows["entropy"]), "norm_entropy": np.mean(rows["norm"]) if rows["norm"] else np.nan,
           "confidence": np.mean(rows["conf"]), "distance": np.mean(rows["dist"])}
    out.update((name, np.mean(rows[name])) for name in ("self", "prev", "next", "first", "sep", "punct", "sink"))
    ids, total = facts.ids, A.sum()
    earlier = np.tril(np.ones((n, n), bool), -1)
    duplicate = (ids[:, None] == ids[None, :]) & earlier
    induction = np.zeros((n, n), bool)
    induction[:, 1:] = duplicate[:, :-1]
    for name, target in (("prev_token_score", np.eye(n, k=-1, dtype=bool)), ("duplicate_score", duplicate),
                         ("induction_score", induction)):
        out[name] = A[target].sum() / total if total > 0 else 0.0
    out["beyond_norm_entropy"] = np.mean(kept["norm"]) if kept["norm"] else np.nan
    for name in ("self", "prev", "next", "sep", "punct"):
        out[f"beyond_{name}"] = np.mean(kept[name]) if kept[name] else np.nan
    out["in_segment"] = min(kept["own"]) if kept["own"] else 0.0
    return out


def _facts(n: int, causal: bool, skip: int, two: bool) -> TextFacts:
    """A repeated word sequence (duplicates and induction targets), punctuation, [CLS] … [SEP] (… [SEP])."""
    words = ["[CLS]"] + [["a", "b", ".", "c", ","][j % 5] for j in range(n - 1)]
    if n >= 3:
        words[-1] = "[SEP]"
    if two and n >= 5:
        words[n // 2] = "[SEP]"
    return TextFacts.of(words, [], [w.startswith("[") for w in words], causal=causal, skip=skip)


def planted(n: int, causal: bool, rng) -> np.ndarray:
    """(H, n, n): itself, previous, first, induction and duplicate over the repeated words, uniform, block
    (its own half), a sliding window, a learned sink (rows keeping 0.3 … 1), an empty head, random."""
    words = np.array([j % 5 for j in range(n)])
    same = words[:, None] == words[None, :]
    earlier = np.tril(np.ones((n, n), bool), -1)
    duplicate = same & earlier
    induction = np.zeros((n, n), bool)
    induction[:, 1:] = duplicate[:, :-1]
    half = np.arange(n) >= n // 2
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    window = (j <= i) & (j >= i - WINDOW)
    heads = [np.eye(n), np.eye(n, k=-1) + np.eye(n) * 1e-3, np.eye(n, 1, 0).T.repeat(n, 0) if n else np.zeros((0, 0)),
             induction + 1e-3, duplicate + 1e-3, np.ones((n, n)), (half[:, None] == half[None, :]) * 1.0,
             window * rng.random((n, n)), rng.random((n, n)) ** 6, rng.random((n, n))]
    heads = np.stack([np.asarray(h, np.float64) for h in heads])
    if causal:
        heads = np.tril(heads)
    heads = np.where(heads.sum(-1, keepdims=True) > 0, heads / np.maximum(heads.sum(-1, keepdims=True), 1e-30), 0)
    heads[-2] *= rng.uniform(0.3, 1.0, (n, 1))  # a learned sink took the rest
    return np.concatenate([heads, np.zeros((1, n, n))]).astype(np.float32)  # and a head with no attention


def _blocks(n: int, causal: bool, cuts: list[int], window: bool = False) -> list[tuple[int, int, int, int]]:
    """(first row, end row, first key, end key) of each block: a causal block's keys stop at its last row, and
    (`window`: for heads whose keys before i − WINDOW are 0) start WINDOW before its first row."""
    edges = [0, *sorted({c for c in cuts if 0 < c < n}), n]
    return [(r0, r1, max(0, r0 - WINDOW) if window else 0, r1 if causal else n) for r0, r1 in zip(edges, edges[1:])]


def _by_backends(A: np.ndarray, facts: TextFacts, blocks) -> dict[str, dict[str, np.ndarray]]:
    compiled, tensors = BlockSums(A.shape[0], facts, threads=2), RowStats(facts, A.shape[0], "cpu")
    for r0, r1, k0, k1 in blocks:
        block = np.ascontiguousarray(A[:, r0:r1, k0:k1])
        compiled.add(block, r0, k0)
        tensors.add(torch.from_numpy(block), r0, k0)
    return {"compiled": measures_from_sums(compiled.finish()[0], facts.n), "tensors": tensors.finish()}


def _check(A: np.ndarray, facts: TextFacts, blocks) -> None:
    expected = [reference(head, facts) for head in A]
    for backend, got in _by_backends(A, facts, blocks).items():
        for name in STAT_NAMES:
            want = np.array([e[name] for e in expected])
            np.testing.assert_allclose(got[name], want, rtol=2e-5, atol=2e-6, equal_nan=True,
                                       err_msg=f"{backend}: {name}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("skip", [1, 0])
@pytest.mark.parametrize("two", [False, True])
def test_planted_heads_in_one_block_and_in_blocks_of_rows(causal, skip, two):
    rng = np.random.default_rng(7)
    n = 13
    A, facts = planted(n, causal, rng), _facts(n, causal, skip, two)
    _check(A, facts, [(0, n, 0, n)])
    _check(A, facts, _blocks(n, causal, [1, 4, 5, 11]))
    if causal:  # the sliding window's blocks start after key 0: the keys before are visible, with probability 0
        _check(A[7:8], facts, _blocks(n, causal, [1, 4, 5, 11], window=True))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 17), causal=st.booleans(), skip=st.integers(0, 1), two=st.booleans(),
       cuts=st.lists(st.integers(1, 16), max_size=5), seed=st.integers(0, 2**16))
def test_random_texts_and_cuts(n, causal, skip, two, cuts, seed):
    rng = np.random.default_rng(seed)
    A, facts = planted(n, True, rng), _facts(n, causal, skip, two)
    A[-2] = rng.random((n, n)) ** 3 * (rng.random((n, 1)) < 0.8)  # some rows left empty
    A[-2] /= np.maximum(A[-2].sum(-1, keepdims=True), 1e-30)
    if causal:
        A = np.tril(A)
    _check(A, facts, _blocks(n, causal, cuts))


def test_a_head_with_nan_has_no_measures_in_either_backend():
    n = 6
    A, facts = planted(n, False, np.random.default_rng(0)), _facts(n, False, 1, False)
    A[2, 3, 4] = np.nan
    for backend, got in _by_backends(A, facts, [(0, n, 0, n)]).items():
        for name in STAT_NAMES:
            assert np.isnan(got[name][2]), (backend, name)
            assert np.isfinite(got[name][[0, 3]]).all(), (backend, name)


@pytest.mark.parametrize("compiled", [True, False])
def test_the_head_table_hides_the_sink_with_the_first_token(compiled):
    """`pattern_stats` reads a run with its first token hidden as a text with no sink key (skip 0)."""
    rng = np.random.default_rng(3)
    n = 11
    words = ["[CLS]"] + [["a", "b", ".", "c"][j % 4] for j in range(n - 2)] + ["[SEP]"]
    run = AttentionRun(tokens=words, attentions=planted(n, True, rng)[None, :-1], is_causal=True,
                       special_mask=[w.startswith("[") for w in words])
    hidden = run.drop_tokens(np.arange(n) == 0)
    facts = TextFacts.of_run(hidden)
    assert facts.skip == 0 and TextFacts.of_run(run).skip == 1
    stats = pattern_stats(hidden, compiled=compiled)
    for h, head in enumerate(hidden.attentions[0]):
        expected = reference(head, facts)
        for name in STAT_NAMES:
            np.testing.assert_allclose(stats[name][0, h], expected[name], rtol=2e-5, atol=2e-6, equal_nan=True,
                                       err_msg=f"head {h}: {name}")
