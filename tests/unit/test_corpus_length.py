"""The rule that says when a length difference explains a sentence's deviations from a corpus
(`mha_viz.corpus.length`): each of its three parts, on planted lengths and deviations, can turn the
message off on its own; the range and median come from the documents counted by length."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import corpus
from mha_viz.corpus import length
from mha_viz.metrics import METRICS


def _counts(lengths: list[int]) -> np.ndarray:
    return np.bincount(np.asarray(lengths))


DOCS = _counts([20, 24, 30, 30, 32, 40, 64])  # shortest 20, median 30, longest 64


def _z(below: int, above: int, calm: int = 10) -> np.ndarray:
    """Planted deviations: `below` heads at −3 sd, `above` at +3 sd, `calm` at ±0.5."""
    values = [-3.0] * below + [3.0] * above + [0.5, -0.5] * (calm // 2)
    return np.asarray(values, dtype=float).reshape(1, -1)


def test_the_range_and_median_of_documents_counted_by_length():
    assert length.length_range(DOCS) == (20, 30.0, 64)
    assert length.length_range(_counts([5, 7])) == (5, 6.0, 7)
    with pytest.raises(ValueError):
        length.length_range(np.zeros(4, dtype=int))


def test_a_short_sentence_whose_heads_fall_below_on_a_growing_metric_is_explained():
    check = corpus.length_check(DOCS, 6, "entropy", _z(below=7, above=1))
    assert (check.shortest, check.median, check.longest) == (20, 30.0, 64)
    assert (check.deviating, check.with_length) == (8, 7)
    assert check.sensitive and check.unusual and check.explains
    text = check.message()
    assert "6 tokens" in text and "20–64 (median 30)" in text and "7 of the 8 heads" in text and "below" in text
    assert METRICS["norm_entropy"].label in text  # the 0..1 form to compare instead
    # a long one, heads above: explained too (the other direction)
    long = corpus.length_check(DOCS, 90, "distance", _z(below=0, above=5))
    assert long.explains and "above" in long.message() and "longer" in long.message()


@pytest.mark.parametrize("n, metric, z, part", [
    (6, "confidence", _z(below=7, above=1), "sensitive"),  # bounded in 0..1: not length-sensitive
    (30, "entropy", _z(below=7, above=1), "unusual"),  # the corpus's median length
    (6, "entropy", _z(below=2, above=6), "direction"),  # most heads deviate against the length
    (6, "entropy", _z(below=2, above=2), "direction"),  # a tie is not most
    (6, "entropy", _z(below=0, above=0), "deviating"),  # nothing deviates: nothing to explain
])
def test_each_part_of_the_rule_can_turn_the_message_off(n, metric, z, part):
    check = corpus.length_check(DOCS, n, metric, z)
    assert not check.explains
    assert {"sensitive": not check.sensitive, "unusual": not check.unusual,
            "direction": check.deviating and 2 * check.with_length <= check.deviating,
            "deviating": check.deviating == 0}[part]


def test_twice_or_half_the_median_is_unusual_inside_the_range():
    wide = _counts([4, 10, 30, 30, 30, 80, 200])  # range 4..200, median 30
    assert corpus.length_check(wide, 15, "entropy", _z(1, 0)).unusual  # half the median
    assert corpus.length_check(wide, 60, "entropy", _z(0, 1)).unusual  # twice
    assert not corpus.length_check(wide, 16, "entropy", _z(1, 0)).unusual
    assert not corpus.length_check(wide, 59, "entropy", _z(0, 1)).unusual
    assert corpus.length_check(DOCS, 16, "entropy", _z(1, 0)).unusual  # over half the median, under the shortest
