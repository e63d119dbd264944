"""Patching over a task (`mha_viz.patch_heads` given a `PromptSet`): each pair's values equal patching that pair
alone (`interventions.patching.patch_heads`, one pair, one batch of its own), whatever the batching and on
grouped-query attention; the mean is theirs, its interval is the seed's; pairs a model cannot run are counted,
not run."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.interventions import patching
from mha_viz.tasks.prompt_set import UNKNOWN, Pair, PromptSet
from mha_viz.text.tokenize import InputError
from tests.models.task_pairs import letter_pairs

pytestmark = pytest.mark.model
def _alone(model, prompts, kept, mode="denoise"):
    return np.stack([patching.patch_heads(model, p.clean, p.corrupted, p.answer, p.wrong, mode).values
                     for p in (prompts.pairs[k] for k in kept)])


@pytest.mark.parametrize("batch", [2, None])
def test_each_pair_is_patching_that_pair_alone_on_toy_induction(batch):
    toy = mha_viz.load_model("toy-induction", device="cpu")
    prompts = letter_pairs(7, seed=1)
    task = mha_viz.patch_heads(toy, prompts, batch=batch, resamples=300, seed=3)
    assert task.kept == list(range(7)) and not task.left_out
    alone = _alone(toy, prompts, task.kept)
    np.testing.assert_allclose(task.per_pair, alone, atol=2e-6)
    np.testing.assert_allclose(task.mean, alone.mean(0), atol=1e-6)
    assert np.all(task.low <= task.mean + 1e-7) and np.all(task.mean <= task.high + 1e-7)
    assert task.p_value.shape == task.mean.shape and np.all((task.p_value > 0) & (task.p_value <= 1))
    again = mha_viz.patch_heads(toy, prompts, batch=batch, resamples=300, seed=3)
    np.testing.assert_array_equal(task.low, again.low)


def test_noise_raw_metric_and_gqa(llama_dir):
    model = mha_viz.load_model(str(llama_dir), device="cpu")
    assert model.num_kv_heads < model.num_heads
    vocab = model.tokenizer.convert_ids_to_tokens(list(range(len(model.tokenizer))))
    words = sorted({t[1:] for t in vocab if t.startswith("Ġ") and t[1:].isalpha() and len(t) > 2})[:30]
    prompts = letter_pairs(6, seed=2, words=words)
    task = mha_viz.patch_heads(model, prompts, mode="noise", metric="raw", batch=4, resamples=200)
    assert len(task.kept) >= 3 and len(task.kept) + sum(task.left_out.values()) == 6  # (a first word may split)
    assert task.per_pair.shape == (len(task.kept), model.num_layers, model.num_heads)
    alone = _alone(model, prompts, task.kept, mode="noise")  # damage, a fraction of each pair's gap
    gaps = (task.m_clean - task.m_corrupted)[:, None, None]
    np.testing.assert_allclose(task.per_pair, alone * gaps, atol=2e-5)  # raw: the logit difference moved


def test_pairs_a_model_cannot_run_are_counted_and_left_out():
    toy = mha_viz.load_model("toy-induction", device="cpu")
    good = letter_pairs(3, seed=4).pairs
    bad = (Pair("q w e r q w", "a s d f q w", " e r", " z"),  # the answer is two tokens
           Pair("q w e r q w", "a s d q w", " e", " z"),  # one token shorter
           Pair("q w e r q w", "a s d f q w", " e", " e"),  # the answer is the wrong token
           Pair("q w e r q w", "a s d f q w", " Mary", " John"))  # words outside the toy's letters
    task = mha_viz.patch_heads(toy, PromptSet(good + bad, "mixed"), resamples=100)
    assert task.kept == [0, 1, 2] and sum(task.left_out.values()) == 4
    assert {"the answer is not one token", "clean and corrupted differ in length",
            "the answer and the wrong token are the same", UNKNOWN} == set(task.left_out)
    with pytest.raises(InputError, match="No pair of 'bad'"):
        mha_viz.patch_heads(toy, PromptSet(bad, "bad"))
    with pytest.raises(TypeError, match="resamples"):
        mha_viz.patch_heads(toy, "q w e", "a s d", resamples=10)
