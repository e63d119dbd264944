"""Heads found from two tokens (issue 54) against an independent computation: Hugging Face's own eager
attention weights of the bundled MiniLM (`output_attentions=True`, the text tokenized by its own
tokenizer), ranked by numpy's argsort, for "it" → "animal" and for every pair of the sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from tests.tolerance import assert_same_order

pytestmark = pytest.mark.model

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def theirs(minilm):
    """(tokens, (layers, heads, n, n) float64 weights) from the model's own forward, not our capture."""
    enc = minilm.tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = minilm.hf_model(**enc, output_attentions=True)
    weights = torch.stack([a[0] for a in out.attentions]).double().numpy()
    return minilm.tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist()), weights


def _reference(weights: np.ndarray, query: int, key: int) -> tuple[np.ndarray, np.ndarray]:
    """(flat head indices, strongest first; the (layers, heads) weights) by numpy's own sort."""
    w = weights[:, :, query, key]
    return np.argsort(-w.ravel(), kind="stable"), w


def test_it_to_animal_is_hugging_faces_ranking(minilm, theirs):
    tokens, weights = theirs
    run = mha_viz.analyze(minilm, TEXT)
    assert run.token_ids == minilm.tokenizer(TEXT)["input_ids"]
    query, key = tokens.index("it"), tokens.index("animal")
    assert (run.tokens[query], run.tokens[key]) == ("it", "animal")
    order, w = _reference(weights, query, key)
    ranked = mha_viz.views.heads_from_tokens(run, query, key)
    heads = run.num_heads
    assert len(ranked) == w.size == run.num_layers * heads
    got = np.array([r.layer * heads + r.head for r in ranked])
    # the weights, each within 1e-5 of Hugging Face's, largest first
    np.testing.assert_allclose([r.weight for r in ranked], w.ravel()[got], atol=1e-5)
    assert all(a.weight >= b.weight for a, b in zip(ranked, ranked[1:]))
    # the top ten heads exactly argsort's (their weights lie far more than 1e-5 apart), the rest up to near ties
    top = np.sort(w.ravel())[::-1][:11]
    assert np.diff(top).min() < -1e-4, top
    assert got[:10].tolist() == order[:10].tolist()
    assert_same_order(got, order, w, 1e-5, "it → animal")
    # the heads the issue found by hand
    assert [(r.layer, r.head) for r in ranked[:2]] == [(3, 1), (5, 11)]
    assert mha_viz.views.heads_from_tokens(run, query, key, top=3) == ranked[:3]


def test_every_pair_of_the_sentence_ranks_as_hugging_face_weighs(minilm, theirs):
    _, weights = theirs
    run = mha_viz.analyze(minilm, TEXT)
    for query in range(run.n):
        for key in range(run.n):
            order, w = _reference(weights, query, key)
            ranked = mha_viz.views.heads_from_tokens(run, query, key)
            got = np.array([r.layer * run.num_heads + r.head for r in ranked])
            np.testing.assert_allclose([r.weight for r in ranked], w.ravel()[got], atol=1e-5)
            assert_same_order(got, order, w, 1e-5, f"{query} → {key}")
