"""tests/tolerance.py, the comparisons of what two computations choose from the same scores: each passes
when only items within the tolerance of the boundary differ, and fails when an item outside it does."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tolerance import (
    assert_same_above,
    assert_same_argmax,
    assert_same_class,
    assert_same_counts,
    assert_same_order,
    assert_same_ranking,
    assert_same_tokens,
    assert_same_top,
    assert_same_vote,
    settled,
)

TOL = 1e-3
SCORES = np.array([0.9, 0.5004, 0.4998, 0.2, 0.7, 0.1])  # 1 and 2 lie within TOL of 0.5, of each other


def test_above():
    ref = SCORES > 0.5
    near = ref.copy()
    near[[1, 2]] = ~near[[1, 2]]  # both within the band: either side
    assert_same_above(ref, near, SCORES, 0.5, TOL)
    far = ref.copy()
    far[4] = False  # 0.7 is far above
    with pytest.raises(AssertionError, match=r"chosen differently at \[4\]"):
        assert_same_above(ref, far, SCORES, 0.5, TOL)


def test_top():
    scores = np.array([0.9, 0.7, 0.5004, 0.5, 0.2])  # the third and the fourth tie within TOL
    assert_same_top(np.array([0, 1, 2]), np.array([1, 0, 3]), scores, TOL)
    with pytest.raises(AssertionError, match=r"\[4\] in one top 3 only"):
        assert_same_top(np.array([0, 1, 2]), np.array([0, 1, 4]), scores, TOL)


def test_order():
    scores = np.array([0.9, 0.7, 0.5004, 0.5])
    assert_same_order(np.array([0, 1, 2, 3]), np.array([0, 1, 3, 2]), scores, TOL)
    with pytest.raises(AssertionError, match="0 and 1 swapped"):
        assert_same_order(np.array([0, 1, 2, 3]), np.array([1, 0, 2, 3]), scores, TOL)


def test_argmax():
    scores = np.array([[0.1, 0.9], [0.8996, 0.3]])
    assert_same_argmax((1, 0), scores, TOL)  # within TOL of the largest
    assert_same_argmax(1, scores, TOL)
    with pytest.raises(AssertionError, match="more than"):
        assert_same_argmax((1, 1), scores, TOL)


def test_ranking():
    scores = np.array([0.9, 0.7, 0.6996, 0.5004, 0.5, 0.1])
    assert_same_ranking([0, 2, 1, 4], [0, 1, 2, 3], scores, TOL)  # 1 and 2 swap, 3 and 4 trade the last place
    with pytest.raises(AssertionError, match="swapped"):
        assert_same_ranking([1, 0, 2, 3], [0, 1, 2, 3], scores, TOL)
    with pytest.raises(AssertionError, match="in one top 4 only"):
        assert_same_ranking([0, 1, 2, 5], [0, 1, 2, 3], scores, TOL)


def test_tokens():
    # the reference's next-token scores after each prefix: after [0] tokens 1 and 2 tie within TOL
    table = {(): [0.9, 0.05, 0.05], (0,): [0.1, 0.4502, 0.4498], (0, 1): [0.2, 0.2, 0.6]}

    def scores_after(prefix):
        return table[tuple(prefix)]
    assert assert_same_tokens([0, 1, 2], [0, 1, 2], scores_after, TOL) == 3
    assert assert_same_tokens([0, 1, 2], [0, 2, 0], scores_after, TOL) == 1  # they part at the tie: no more
    with pytest.raises(AssertionError, match="step 0"):
        assert_same_tokens([0, 1, 2], [1, 1, 2], scores_after, TOL)
    with pytest.raises(AssertionError, match="step 2"):
        assert_same_tokens([0, 1, 2], [0, 1, 0], scores_after, TOL)
    with pytest.raises(AssertionError, match="the same tokens, then one stops"):
        assert_same_tokens([0, 1, 2], [0, 1], scores_after, TOL)


def test_counts():
    edges = np.array([0.25, 0.5, 0.75])
    scores = np.array([0.1, 0.2496, 0.3, 0.5008, 0.6, 0.9])  # 0.2496 within TOL of 0.25, 0.5008 of 0.5
    assert_same_counts([2, 1, 2, 1], scores, edges, TOL)  # the reference's own
    assert_same_counts([1, 2, 2, 1], scores, edges, TOL)  # 0.2496 up
    assert_same_counts([1, 3, 1, 1], scores, edges, TOL)  # and 0.5008 down
    with pytest.raises(AssertionError, match="below the edges"):
        assert_same_counts([2, 1, 1, 2], scores, edges, TOL)  # 0.6 in the last bin: far from an edge
    with pytest.raises(AssertionError):
        assert_same_counts([2, 1, 2], scores, edges, TOL)  # a bin short


def _rule(x) -> str:
    """A small classifier as head_stats.classify is one: thresholds, a sum, an argmax and a sort."""
    label = "low"
    if x["a"] + x["b"] > 0.5:
        label = "high:" + max(("a", "b"), key=lambda n: x[n])
    if label == "low" and np.isfinite(x["c"]) and x["c"] >= 0.3:
        label = "mixed:" + "".join(sorted(("a", "b", "c"), key=lambda n: -x[n])[:2])
    return label


def test_settled_answers_only_where_the_whole_box_answers_alike():
    assert settled(_rule, {"a": 0.4, "b": 0.3, "c": 0.0}, TOL) == "high:a"
    assert settled(_rule, {"a": 0.2502, "b": 0.25, "c": 0.0}, TOL) is None  # the sum at 0.5, a and b tied
    assert settled(_rule, {"a": 0.4, "b": 0.3999, "c": 0.0}, TOL) is None  # which is larger: either
    assert settled(_rule, {"a": 0.2, "b": 0.1, "c": 0.3}, TOL) is None  # c at its threshold
    assert settled(_rule, {"a": 0.2, "b": 0.1, "c": 0.6}, TOL) == "mixed:ca"
    assert settled(_rule, {"a": 0.1, "b": 0.1, "c": 0.6}, TOL) is None  # the second place: a or b
    assert settled(_rule, {"a": 0.2, "b": 0.1, "c": float("nan")}, TOL) == "low"  # NaN compares false
    assert settled(_rule, {"a": 0.4, "b": 0.3, "c": 0.0}, {"a": 0.2, "b": 0.0, "c": 0.0}) is None  # per name


def test_same_class():
    inputs = {"a": np.array([0.4, 0.2502, 0.2]), "b": np.array([0.3, 0.25, 0.1]), "c": np.array([0.0, 0.0, 0.6])}
    ref = [_rule({n: v[i] for n, v in inputs.items()}) for i in range(3)]
    assert ref == ["high:a", "high:a", "mixed:ca"]
    assert_same_class(ref, ["high:a", "low", "mixed:ca"], inputs, _rule, TOL)  # item 1 is within the band
    with pytest.raises(AssertionError, match=r"\(0, 'high:a', 'high:b', 'high:a'\)"):
        assert_same_class(ref, ["high:b", "high:a", "mixed:ca"], inputs, _rule, TOL)
    with pytest.raises(AssertionError, match="mixed:ca"):
        assert_same_class(ref, ["high:a", "high:a", "low"], inputs, _rule, TOL)


def test_same_vote():
    """Three voters on two items: item 0's votes are settled (high twice); item 1's first voter is at a
    threshold and may vote either way, so low and high both can win there."""
    voters = [{"a": np.array([0.4, 0.2502]), "b": np.array([0.3, 0.25]), "c": np.array([0.0, 0.0])},
              {"a": np.array([0.4, 0.1]), "b": np.array([0.3, 0.1]), "c": np.array([0.0, 0.0])},
              {"a": np.array([0.1, 0.4]), "b": np.array([0.1, 0.3]), "c": np.array([0.0, 0.0])}]
    order = ("high", "mixed", "low")

    def key(label):
        return label.split(":")[0]
    assert_same_vote(["high", "high"], voters, _rule, TOL, order, key)
    assert_same_vote(["high", "low"], voters, _rule, TOL, order, key)
    with pytest.raises(AssertionError, match=r"\(0, 'low'"):
        assert_same_vote(["low", "high"], voters, _rule, TOL, order, key)
    with pytest.raises(AssertionError, match=r"\(1, 'mixed'"):
        assert_same_vote(["high", "mixed"], voters, _rule, TOL, order, key)
