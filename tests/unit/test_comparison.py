"""mha_viz.compare on synthetic runs: identical runs do not change, a planted head is found again
with the JS divergence scipy gives, BERT-like and GPT-2-like tokenizations line up on words,
unrelated inputs and models of different shapes fall back to metrics and depth, and causal runs
or runs with hidden tokens never give NaN."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon

import mha_viz
from mha_viz import AttentionRun, metrics
from mha_viz.views import comparison


@pytest.fixture(autouse=True)
def _basis_foretold(monkeypatch):
    """Every comparison made in this file: `basis_kind`, which the page's cost estimate reads before comparing,
    names the basis `compare` then chose (tokens, words with or without special tokens, metrics, depth)."""
    compare = mha_viz.compare

    def checked(run_a, run_b):
        cmp = compare(run_a, run_b)
        assert comparison.basis_kind(run_a, run_b) == cmp.kind, cmp.basis
        return cmp
    monkeypatch.setattr(mha_viz, "compare", checked)


def _random(L=2, H=3, n=6, *, causal=False, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.random((L, H, n, n)) + 0.01
    if causal:
        a = np.tril(a)
    return (a / a.sum(-1, keepdims=True)).astype(np.float32)


def _run(a, tokens=None, *, causal=False, ids=None, words=None, special=None) -> AttentionRun:
    n = a.shape[-1]
    run = AttentionRun.from_array(a, tokens or [f"t{i}" for i in range(n)], is_causal=causal)
    if ids is not None:
        run.token_ids = list(ids)
    if words is not None:
        run.word_ids = list(words)
    if special is not None:
        run.special_mask = list(special)
    return run


def _scipy_js(A: np.ndarray, B: np.ndarray) -> float:
    """Mean over rows of JS in nats; scipy returns the square root of JS (base e by default)."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    keep = (A.sum(1) > 1e-6) & (B.sum(1) > 1e-6)
    if not keep.any():
        return 0.0
    return float(np.mean([jensenshannon(p, q) ** 2 for p, q in zip(A[keep], B[keep])]))


def _prev_token(n: int) -> np.ndarray:
    """Each query on the previous token, the first on itself."""
    p = np.eye(n, k=-1)
    p[0, 0] = 1.0
    return p


# --- tokens -----------------------------------------------------------------------------------

def test_identical_runs_do_not_change():
    a = _random(3, 4, 7)
    cmp = mha_viz.compare(_run(a), _run(a.copy()))
    assert cmp.kind == "tokens" and cmp.same_shape
    assert "token by token" in cmp.basis
    np.testing.assert_allclose(cmp.head_divergence, 0.0, atol=1e-7)
    np.testing.assert_allclose(cmp.change, 0.0, atol=1e-7)
    diffs = [c for c in cmp.table.columns if c.endswith("_diff")]
    assert diffs and np.allclose(cmp.table[diffs].to_numpy(np.float64), 0.0, equal_nan=True)
    assert len(cmp.ranked()) == 12 and len(cmp.ranked(5)) == 5


@pytest.mark.parametrize("causal", [False, True])
def test_planted_head_is_found_with_scipys_js(causal):
    a = _random(3, 4, 9, causal=causal, seed=1)
    b = a.copy()
    b[1, 2] = _prev_token(9)
    cmp = mha_viz.compare(_run(a, causal=causal), _run(b, causal=causal))
    assert cmp.kind == "tokens"
    assert np.unravel_index(np.argmax(cmp.head_divergence), (3, 4)) == (1, 2)
    layer, head, value = cmp.ranked()[0]
    assert (layer, head) == (1, 2)
    assert value == pytest.approx(_scipy_js(a[1, 2], b[1, 2]), abs=1e-6)
    assert cmp.head_divergence[1, 2] == pytest.approx(value)
    others = np.delete(cmp.head_divergence.ravel(), 1 * 4 + 2)
    np.testing.assert_allclose(others, 0.0, atol=1e-7)
    row = cmp.table.iloc[0]
    assert (row["layer"], row["head"]) == (1, 2) and row["js"] == pytest.approx(value)
    assert row["prev_b"] == pytest.approx(8 / 9, abs=1e-6)  # planted prev-token head: (n − 1)/n
    assert row["prev_diff"] == pytest.approx(row["prev_b"] - row["prev_a"])


def test_every_head_matches_scipy_and_blocking_changes_nothing(monkeypatch):
    a, b = _random(2, 3, 11, seed=2), _random(2, 3, 11, seed=3)
    expected = np.array([[_scipy_js(a[layer, h], b[layer, h]) for h in range(3)] for layer in range(2)])
    np.testing.assert_allclose(comparison.pattern_divergence(a, b), expected, atol=1e-6)
    monkeypatch.setattr(comparison, "CHUNK_ENTRIES", 11 * 11)  # one head a block
    np.testing.assert_allclose(comparison.pattern_divergence(a, b), expected, atol=1e-6)


def test_disjoint_rows_give_ln2_and_inputs_stay_untouched():
    n = 5
    a = np.broadcast_to(np.eye(n), (1, 1, n, n)).astype(np.float64)
    b = np.broadcast_to(np.roll(np.eye(n), 1, axis=1), (1, 1, n, n)).astype(np.float64)
    a_before = a.copy()
    assert comparison.pattern_divergence(a, b)[0, 0] == pytest.approx(math.log(2), abs=1e-12)
    np.testing.assert_array_equal(a, a_before)  # float64 input: not scaled in place


def test_token_ids_decide_over_strings():
    a = _random(1, 2, 4)
    same_text = mha_viz.compare(_run(a, list("abcd"), ids=[1, 2, 3, 4]),
                                _run(a, list("abcd"), ids=[1, 2, 3, 9]))
    assert same_text.kind == "words"  # same strings, other ids: not the same tokens
    no_ids = mha_viz.compare(_run(a, list("abcd")), _run(a, list("abcd")))
    assert no_ids.kind == "tokens"


# --- words ------------------------------------------------------------------------------------

def _bert_and_gpt2(seed=4):
    """'[CLS] the key ##s are [SEP]' (word ids 0 1 2 2 3 4) and 'the keys are'."""
    bert = _run(_random(2, 2, 6, seed=seed), ["[CLS]", "the", "key", "s", "are", "[SEP]"],
                ids=[101, 1996, 3145, 2015, 2024, 102], words=[0, 1, 2, 2, 3, 4],
                special=[True, False, False, False, False, True])
    gpt2 = _run(_random(2, 2, 3, causal=True, seed=seed + 1), ["the", " keys", " are"], causal=True,
                ids=[1169, 8251, 389])
    return bert, gpt2


def _hand_words(A: np.ndarray) -> np.ndarray:
    """BERT's head without [CLS]/[SEP], rows renormalised, 'key ##s' merged: summed as keys,
    averaged as queries."""
    sub = np.asarray(A, np.float64)[1:5, 1:5]
    sub = sub / sub.sum(1, keepdims=True)
    keys = np.stack([sub[:, 0], sub[:, 1] + sub[:, 2], sub[:, 3]], axis=1)  # (4, 3)
    return np.stack([keys[0], (keys[1] + keys[2]) / 2, keys[3]])  # (3, 3)


def test_bert_and_gpt2_tokens_line_up_on_words():
    bert, gpt2 = _bert_and_gpt2()
    cmp = mha_viz.compare(bert, gpt2)
    assert cmp.kind == "words"
    assert "word by word" in cmp.basis and "[CLS]" in cmp.basis and "[SEP]" in cmp.basis
    assert cmp.aligned[0].word_ids == [0, 1, 1, 2]  # renumbered after the drop
    for layer, head in [(0, 0), (1, 1)]:
        A, B, diff, labels_a, labels_b = cmp.pair(layer, head)
        expected = _hand_words(bert.attentions[layer, head])
        np.testing.assert_allclose(A, expected, atol=1e-6)
        np.testing.assert_allclose(B, gpt2.attentions[layer, head], atol=1e-7)
        np.testing.assert_allclose(diff, expected - gpt2.attentions[layer, head], atol=1e-6)
        assert labels_a == ["the", "keys", "are"] and labels_b == ["the", " keys", " are"]
        js = _scipy_js(expected, gpt2.attentions[layer, head])
        assert cmp.head_divergence[layer, head] == pytest.approx(js, abs=1e-6)
    np.testing.assert_array_equal(cmp.change, cmp.head_divergence)
    assert bert.n == 6 and bert.hidden is None  # the input runs are left as they were


def test_same_word_count_of_different_texts_compares_by_position():
    a, b = _random(1, 2, 4, seed=5), _random(1, 2, 4, seed=6)
    cmp = mha_viz.compare(_run(a, ["a", "cat", "s", "sat"], ids=[1, 2, 3, 4], words=[0, 1, 1, 2]),
                          _run(b, ["the", "dog", "ran", "off"], ids=[5, 6, 7, 8], words=[0, 1, 1, 2]))
    assert cmp.kind == "words" and "position" in cmp.basis
    assert cmp.head_divergence.shape == (1, 2) and np.isfinite(cmp.head_divergence).all()


# --- metrics and depth ----------------------------------------------------------------------

def test_unrelated_inputs_fall_back_to_head_metrics():
    run_a = _run(_random(2, 3, 5, seed=7))
    run_b = _run(_random(2, 3, 8, seed=8), [f"u{i}" for i in range(8)])
    cmp = mha_viz.compare(run_a, run_b)
    assert cmp.kind == "metrics" and cmp.same_shape and cmp.head_divergence is None
    assert "5 and 8" in cmp.basis
    ta, tb = metrics.head_table(run_a), metrics.head_table(run_b)
    merged = ta.merge(tb, on=["layer", "head"], suffixes=("_a", "_b"))
    got = merged.merge(cmp.table, on=["layer", "head"], suffixes=("", "_cmp"))
    for c in ("entropy", "prev", "distance", "first", "induction_score"):
        assert {f"{c}_a", f"{c}_b", f"{c}_diff"} <= set(cmp.table.columns)
        np.testing.assert_allclose(got[f"{c}_diff"], got[f"{c}_b"] - got[f"{c}_a"], atol=1e-12)  # independent
        np.testing.assert_allclose(got[f"{c}_a_cmp"], got[f"{c}_a"], atol=1e-12)
    assert list(got["pattern_a_cmp"]) == list(got["pattern_a"])  # the head table's class, row for row
    assert "js" not in cmp.table.columns
    # change: mean |b − a| over the 0..1 columns, by hand
    cols = list(comparison.CHANGE_COLUMNS)
    by_hand = np.nanmean(np.abs(tb[cols].to_numpy(float) - ta[cols].to_numpy(float)), axis=1).reshape(2, 3)
    np.testing.assert_allclose(cmp.change, by_hand, atol=1e-12)
    assert (np.diff(cmp.table["change"].to_numpy()) <= 0).all()  # most changed first
    assert cmp.ranked(1)[0][2] == pytest.approx(by_hand.max())
    A, B, diff, labels_a, labels_b = cmp.pair(1, 2)
    assert diff is None and A.shape == (5, 5) and B.shape == (8, 8) and len(labels_b) == 8


def test_models_of_different_shapes_compare_by_depth():
    run_a = _run(_random(2, 4, 5, seed=9))
    run_b = _run(_random(3, 2, 5, seed=10))
    cmp = mha_viz.compare(run_a, run_b)
    assert not cmp.same_shape and cmp.kind == "metrics"
    assert cmp.change is None and cmp.head_divergence is None and cmp.ranked() == []
    d = cmp.depth
    assert list(d.columns[:4]) == ["run", "layer", "head", "relative_depth"] and "entropy" in d.columns
    assert (d["run"] == "A").sum() == 8 and (d["run"] == "B").sum() == 6
    assert d["relative_depth"].between(0, 1).all()
    assert sorted(set(d.loc[d["run"] == "B", "relative_depth"])) == [0.0, 0.5, 1.0]
    ta = metrics.head_table(run_a)
    np.testing.assert_allclose(d.loc[d["run"] == "A", "entropy"], ta["entropy"])
    A, B, diff, _, _ = cmp.pair(1, 1)
    assert diff is None


def test_relative_depth_of_a_partial_capture_and_one_layer_model():
    partial = _run(_random(2, 2, 4, seed=11))
    partial.layer_ids, partial.model_layers = [2, 5], 6
    single = _run(_random(1, 3, 4, seed=12))
    d = mha_viz.compare(partial, single).depth
    np.testing.assert_allclose(d.loc[d["run"] == "A", "relative_depth"], [0.4, 0.4, 1.0, 1.0])
    np.testing.assert_allclose(d.loc[d["run"] == "B", "relative_depth"], 0.0)
    assert list(d.loc[d["run"] == "A", "layer"]) == [2, 2, 5, 5]


# --- no NaN -----------------------------------------------------------------------------------

def _sink_run(seed: int) -> AttentionRun:
    """Causal, with head (0, 1) putting queries 1-3's attention all on the first token, so hiding
    the first token leaves those rows of that head empty."""
    a = _random(2, 2, 6, causal=True, seed=seed)
    a[0, 1, 1:4] = 0.0
    a[0, 1, 1:4, 0] = 1.0
    return _run(a, causal=True, ids=range(6))


def test_causal_runs_and_hidden_tokens_give_no_nan():
    first = np.array([True] + [False] * 5)
    run_a, run_b = _sink_run(13).drop_tokens(first), _sink_run(14).drop_tokens(first)
    assert run_a.hidden.heads_with_empty_rows >= 1
    cmp = mha_viz.compare(run_a, run_b)
    assert cmp.kind == "tokens"
    assert np.isfinite(cmp.head_divergence).all() and np.isfinite(cmp.change).all()
    assert run_a.hidden.empty[0, 1].sum() == 3
    for layer, head in [(0, 1), (1, 0)]:  # empty rows skipped, as _scipy_js does
        expected = _scipy_js(run_a.attentions[layer, head], run_b.attentions[layer, head])
        assert cmp.head_divergence[layer, head] == pytest.approx(expected, abs=1e-6)
    assert np.isfinite(cmp.table["js"]).all()
    # hidden in one run only: different tokens, same words once the sink is gone
    causal = mha_viz.compare(_sink_run(13), run_b)
    assert np.isfinite(causal.change).all()


def test_heads_with_only_empty_rows_score_zero():
    a, b = _random(1, 2, 4, seed=17), _random(1, 2, 4, seed=18)
    a[0, 0] = 0.0  # every query's attention went to hidden tokens
    b[0, 1, 2] = 0.0  # one empty row: skipped
    js = comparison.pattern_divergence(a, b)
    assert js[0, 0] == 0.0
    assert js[0, 1] == pytest.approx(_scipy_js(a[0, 1], b[0, 1]), abs=1e-6)


def test_all_special_run_cannot_be_aligned_on_words():
    only_special = _run(_random(1, 1, 2, seed=15), ["[CLS]", "[SEP]"], special=[True, True])
    other = _run(_random(1, 1, 3, seed=16))
    cmp = mha_viz.compare(only_special, other)
    assert cmp.kind == "metrics" and isinstance(cmp.table, pd.DataFrame)
    assert np.isfinite(cmp.change).all()


# --- rounding ----------------------------------------------------------------------------------

def _rounded(a: np.ndarray, dtype) -> np.ndarray:
    """a's probabilities as a run in `dtype` holds them (rounded there, then read back in float32 and renormalised,
    as a half-precision run's rows are)."""
    import torch
    b = torch.from_numpy(a).to(dtype).double().numpy()
    return (b / b.sum(-1, keepdims=True)).astype(np.float32)


def test_rounding_is_noise_in_its_precision_and_change_in_a_finer_one():
    """Issue 90: one model on one text computed two ways drew a vivid change map of 1e-16. Runs that differ only by
    bfloat16's rounding of every probability are `unchanged` in bfloat16, and the drawn grid is one flat colour
    with no colour bar; the same difference declared float32 is a change; a planted head is one in any precision."""
    import torch

    from mha_viz.features.compare.figures import change_grid
    a = _random(3, 4, 9, seed=2)
    b = _rounded(a, torch.bfloat16)
    run_a, run_b = _run(a), _run(b)
    run_a.precision = run_b.precision = "bfloat16"
    cmp = mha_viz.compare(run_a, run_b)
    assert cmp.change.max() > 0 and cmp.unchanged
    assert cmp.noise == pytest.approx((8 * 2.0**-7) ** 2 / 8)
    trace = change_grid(cmp).data[0]
    assert trace.showscale is False and trace.zmax - trace.zmin > 100 * cmp.change.max()
    assert "within floating-point noise" in change_grid(cmp).layout.title.text

    run_a.precision = run_b.precision = "float32"
    finer = mha_viz.compare(run_a, run_b)
    assert not finer.unchanged and change_grid(finer).data[0].showscale is not False
    planted = b.copy()
    planted[2, 1] = _prev_token(9)
    run_p = _run(planted)
    run_p.precision = run_a.precision = "bfloat16"
    assert not mha_viz.compare(run_a, run_p).unchanged


def test_rounding_noise_follows_the_coarser_precision():
    eps = {"float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10}
    for p, e in eps.items():
        assert comparison.rounding_noise("tokens", "float32", p) == pytest.approx((8 * e) ** 2 / 8)
        assert comparison.rounding_noise("metrics", p, "") == pytest.approx(8 * e)
