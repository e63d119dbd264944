"""The time left of a running job (`mha_viz.budget.time_left`), on a fake clock: nothing until the pace is
known past the first step (its warm-up), then the work left at the pace since; a corpus's work counted in
characters (`corpus.batching.work`), so that batches sorted shortest first do not promise too little time."""

from __future__ import annotations

import math

import pytest

from mha_viz.budget.time_left import ESTIMATING, FINISHING, TimeLeft, say
from mha_viz.corpus.batching import plan, work


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_promised_before_the_pace_is_known_past_the_warm_up():
    clock = Clock()
    left = TimeLeft(30, clock=clock)  # a scan's 30 layers
    clock.now += 20.0  # the first layer: the forward's start, compiling, buffers
    assert left.step() is None and say(left.seconds()) == ESTIMATING
    for done in range(2, 6):
        clock.now += 5.0  # then 5 s a layer
        assert left.step() == pytest.approx((30 - done) * 5.0)
    assert say(left.seconds()) == "about 125 s left"
    clock.now += 10.0  # slower now: the estimate follows the pace since the warm-up, not the first layer's
    assert left.seconds() == pytest.approx(25 * 30.0 / 4)


def test_without_a_warm_up_the_pace_counts_from_the_start():
    clock = Clock()
    left = TimeLeft(10, warm_up=0, clock=clock)
    clock.now += 3.0
    assert left.step(2) == pytest.approx(8 * 1.5)


def test_the_end_and_an_unknown_estimate_are_said_as_such():
    clock = Clock()
    left = TimeLeft(2, clock=clock)
    left.step()
    clock.now += 1.0
    assert left.step() == 0.0 and say(0.0) == FINISHING
    assert say(None) == say(math.nan) == say(math.inf) == ESTIMATING
    assert say(7.2) == "about 7 s left" and say(0.7) == "about 1 s left" and say(600) == "about 10 min left"


def test_a_corpus_sorted_shortest_first_is_timed_by_its_characters():
    """Each batch takes time in proportion to its characters (under the cap); the documents come shortest
    first within a window. Counted in documents, the pace of the short batches promised far too little time
    ("7 s left" for 28 s); counted in characters, the estimate after the second batch is the truth."""
    docs = [("x" * 40 + " ") * (1 + i % 64) for i in range(512)]  # 41 … 2,624 characters (the cap reads 2,048)
    batches = list(plan(docs, 16))
    cost = [work(b, 512) for b in batches]  # seconds each batch takes: its work, one unit a second

    def estimate(units) -> float:
        clock = Clock()
        left = TimeLeft(sum(units(b) for b in batches), clock=clock)
        for b, c in zip(batches[:2], cost[:2]):
            clock.now += c
            seconds = left.step(units(b))
        return seconds

    truth = sum(cost[2:])
    assert estimate(lambda b: work(b, 512)) == pytest.approx(truth)
    by_documents = estimate(len)
    assert by_documents < 0.6 * truth  # the old estimate, for contrast: about half the time left
