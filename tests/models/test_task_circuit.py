"""Path patching and circuits over a task (`mha_viz.tasks.path_patch_many`, `faithfulness_set`, `mha_viz.circuit`
given a `PromptSet`): on toy-induction, each pair's values equal `circuits.path_patching` of that pair alone, the
mean is the pairs' mean within 1e-6, normalised values are the raw ones over each pair's gap, the interval holds
the mean and is the same with the same seed, and a pair with no gap is left out and counted."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import tasks
from mha_viz.circuits import edges, path_patching
from mha_viz.tasks.circuit_set import NO_GAP
from mha_viz.tasks.prompt_set import Pair, PromptSet
from tests.models.task_pairs import letter_pairs

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def ranked(toy_induction):
    """The edges of the first pair by EAP, strongest first: the circuit's candidates."""
    p = letter_pairs(1, seed=11).pairs[0]
    return edges.edge_attribution(toy_induction, p.clean, p.corrupted, p.answer, p.wrong).top(12)


def test_path_patching_over_a_set_is_each_pair_alone_and_their_mean(toy_induction, ranked):
    prompts = letter_pairs(5, seed=12)
    chosen = list(zip(ranked["sender"], ranked["receiver"]))[:6]
    raw = tasks.path_patch_many(toy_induction, prompts, edges=chosen, metric="raw", resamples=200, seed=4)
    alone = [path_patching.path_patch_ends(toy_induction, p.clean, p.corrupted, chosen, p.answer, p.wrong)
             for p in prompts.pairs]
    want = np.stack([a[0] for a in alone])
    np.testing.assert_allclose(raw.per_pair, want, atol=1e-6)
    np.testing.assert_allclose(raw.mean, want.mean(0), atol=1e-6)
    assert raw.edges == chosen and np.all(raw.low <= raw.mean + 1e-12) and np.all(raw.mean <= raw.high + 1e-12)
    gaps = np.array([a[1] - a[2] for a in alone])
    normalised = tasks.path_patch_many(toy_induction, prompts, edges=chosen, resamples=200, seed=4)
    np.testing.assert_allclose(normalised.per_pair, want / gaps[:, None], rtol=1e-6, atol=1e-9)
    again = tasks.path_patch_many(toy_induction, prompts, edges=chosen, resamples=200, seed=4)
    np.testing.assert_array_equal(again.low, normalised.low)  # the same seed, the same interval
    assert normalised.p_value.shape == (len(chosen),)


def test_the_faithfulness_curve_over_a_set_is_the_mean_of_each_pairs_curve(toy_induction, ranked):
    prompts = letter_pairs(4, seed=13)
    sizes = [0, 3, 12]
    task = tasks.faithfulness_set(toy_induction, prompts, ranked.rename(columns={"score": "mean"}), sizes,
                                  resamples=200)
    want = np.stack([path_patching.faithfulness_curve(toy_induction, p.clean, p.corrupted, ranked, sizes, p.answer,
                                                      p.wrong)["faithfulness"].to_numpy() for p in prompts.pairs])
    np.testing.assert_allclose(task.per_pair, want, atol=1e-6)
    np.testing.assert_allclose(task.curve["mean"], want.mean(0), atol=1e-6)
    assert task.curve["k"].tolist() == sizes
    assert np.all(task.curve["low"] <= task.curve["mean"] + 1e-12)
    np.testing.assert_allclose(task.per_pair[:, 0], 0.0, atol=1e-6)  # no edge clean: the corrupted run
    one = mha_viz.circuit(toy_induction, prompts, edges=ranked.head(3), resamples=200)
    assert one.faithfulness == pytest.approx(float(want[:, 1].mean()), abs=1e-6)


def test_a_pair_with_no_gap_is_left_out_and_counted(toy_induction, ranked):
    good = letter_pairs(2, seed=14).pairs
    same = Pair(good[0].clean, good[0].clean, good[0].answer, good[0].wrong)  # corrupted = clean: no gap
    prompts = PromptSet((*good, same), "with a pair of no gap")
    task = tasks.faithfulness_set(toy_induction, prompts, ranked, [3], resamples=100)
    assert task.kept == [0, 1] and task.left_out == {NO_GAP: 1}
