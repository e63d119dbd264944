"""Edge attribution over a task (`mha_viz.edge_attribution` given a `PromptSet`): each pair's scores equal
`edge_attribution` of that pair alone (EAP batched, EAP-IG pair by pair), on toy-induction and on grouped-query
attention; normalised scores are the raw ones over each pair's gap; the table's mean is the pairs' mean."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.circuits import edges
from tests.models.task_pairs import letter_pairs

pytestmark = pytest.mark.model


def _alone(model, prompts, kept, method="eap", steps=1):
    return np.stack([edges.edge_attribution(model, p.clean, p.corrupted, p.answer, p.wrong, method=method,
                                            steps=steps).scores["score"].to_numpy()
                     for p in (prompts.pairs[k] for k in kept)])


@pytest.mark.parametrize("batch", [3, None])
def test_eap_of_each_pair_is_that_pair_alone(batch):
    toy = mha_viz.load_model("toy-induction", device="cpu")
    prompts = letter_pairs(6, seed=5)
    task = mha_viz.edge_attribution(toy, prompts, metric="raw", batch=batch, resamples=200, seed=1)
    assert task.kept == list(range(6))
    alone = _alone(toy, prompts, task.kept)
    scale = np.abs(alone).max()
    np.testing.assert_allclose(task.per_pair, alone, atol=2e-6 * scale)
    np.testing.assert_allclose(task.table["mean"], alone.mean(0), atol=2e-6 * scale)
    one = edges.edge_attribution(toy, prompts.pairs[0].clean, prompts.pairs[0].corrupted, prompts.pairs[0].answer,
                                 prompts.pairs[0].wrong)
    assert list(task.table["receiver"]) == list(one.scores["receiver"])  # the same edges, in the same order
    mean, low, high = (task.table[c].to_numpy() for c in ("mean", "low", "high"))
    assert np.all(low <= mean + 1e-9) and np.all(mean <= high + 1e-9)
    normalised = mha_viz.edge_attribution(toy, prompts, batch=batch, resamples=200, seed=1)
    np.testing.assert_allclose(normalised.per_pair, task.per_pair / (task.m_clean - task.m_corrupted)[:, None],
                               rtol=1e-5, atol=1e-7)


def test_eap_ig_and_gqa(llama_dir):
    model = mha_viz.load_model(str(llama_dir), device="cpu")
    vocab = model.tokenizer.convert_ids_to_tokens(list(range(len(model.tokenizer))))
    words = sorted({t[1:] for t in vocab if t.startswith("Ġ") and t[1:].isalpha() and len(t) > 2})[:30]
    prompts = letter_pairs(4, seed=6, words=words)
    eap = mha_viz.edge_attribution(model, prompts, metric="raw", resamples=100)
    np.testing.assert_allclose(eap.per_pair, _alone(model, prompts, eap.kept), atol=1e-5)
    ig = mha_viz.edge_attribution(model, prompts, method="eap-ig", steps=2, metric="raw", resamples=100)
    assert ig.kept == eap.kept and ig.steps == 2
    np.testing.assert_allclose(ig.per_pair, _alone(model, prompts, ig.kept, "eap-ig", 2), atol=1e-5)
    assert len(ig.top(5)) == 5 and abs(ig.top(1)["mean"].iloc[0]) == np.abs(ig.table["mean"]).max()


@pytest.mark.parametrize("batch", [4, None])
def test_eap_ig_batched_over_pairs_is_each_pair_alone(batch):
    """EAP-IG over a task runs a batch of pairs at each point of their paths (groups of 4 and 2 pairs, or all six
    at once): each pair's scores are what `edge_attribution` gives that pair alone, and the ends its m's."""
    toy = mha_viz.load_model("toy-induction", device="cpu")
    prompts = letter_pairs(6, seed=5)
    task = mha_viz.edge_attribution(toy, prompts, method="eap-ig", steps=3, metric="raw", batch=batch,
                                    resamples=100)
    alone = [edges.edge_attribution(toy, p.clean, p.corrupted, p.answer, p.wrong, method="eap-ig", steps=3)
             for p in (prompts.pairs[k] for k in task.kept)]
    scores = np.stack([one.scores["score"].to_numpy() for one in alone])
    np.testing.assert_allclose(task.per_pair, scores, atol=2e-6 * np.abs(scores).max())
    np.testing.assert_allclose(task.m_clean, [one.m_clean for one in alone], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(task.m_corrupted, [one.m_corrupted for one in alone], rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="steps"):
        mha_viz.edge_attribution(toy, prompts, method="eap-ig", steps=0)
