"""The loss with heads switched off, computed in one place (mha_viz.interventions.heads_off_loss): one text
(`ablation`), a corpus's padded batches (`corpus.importance`) and the live view's passes (`ablation_outcome`) give
the same loss for the same text and mask, for a decoder, a masked-LM encoder and an embedding-only encoder; and a
change planted in that one place reaches every one of them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from mha_viz.corpus import importance
from mha_viz.interventions import ablation, heads_off_loss
from mha_viz.interventions import ablation_outcome as outcome
from mha_viz.text import loss_inputs

TEXT = "the cat sat on the mat and the dog sat on the log"
LONGER = "attention heads look at tokens; some look back, some look at the start of the text"


@pytest.fixture(scope="module")
def tiny_embedder(tiny_bert):
    """The random BERT without its LM head: an embedding-only encoder (the loss is 1 − cosine)."""
    return dataclasses.replace(tiny_bert, hf_model=tiny_bert.hf_model.bert)


MODELS = ["tiny_gpt2", "tiny_bert", "tiny_embedder"]


def _order_and_keep(model, f: float):
    """A random order of the heads and the keep mask of its first ⌈f · L·H⌉ heads switched off."""
    L, H = model.num_layers, model.num_heads
    order = np.random.default_rng(3).permutation(L * H)
    keep = np.ones(L * H, bool)
    keep[order[: int(np.ceil(f * L * H))]] = False
    return order, keep.reshape(L, H)


@pytest.mark.parametrize("which", MODELS)
def test_every_caller_gives_the_same_loss_for_the_same_text_and_mask(request, which):
    """`ablation.masked_loss`, `ablation.pruning_curve`, the live view's `ablated` and the corpus's pruning curve
    of a padded batch (a shorter and a longer document: the text's loss is 2 × the mean − the other's)."""
    model = request.getfixturevalue(which)
    assert loss_inputs.loss_kind(model) == {"tiny_gpt2": loss_inputs.NEXT_TOKEN, "tiny_bert": loss_inputs.MASKED_LM,
                                            "tiny_embedder": loss_inputs.EMBEDDING}[which]
    order, keep = _order_and_keep(model, 0.4)
    one = ablation.masked_loss(model, TEXT, keep)
    assert one != pytest.approx(ablation.masked_loss(model, TEXT, np.ones_like(keep)))  # heads did go
    assert ablation.pruning_curve(model, TEXT, order, [0.4])[0] == pytest.approx(one, rel=1e-6)
    assert outcome.ablated(model, TEXT, keep).loss == pytest.approx(one, rel=1e-5, abs=1e-7)
    mean = importance.pruning_curve(model, [TEXT, LONGER], order, [0.4])[0]
    other = ablation.masked_loss(model, LONGER, keep)
    assert 2 * mean - other == pytest.approx(one, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("which", MODELS)
def test_a_loss_planted_in_the_one_place_reaches_every_caller(request, which, monkeypatch):
    """`heads_off_loss.losses` made to answer its loss + 1: the one text's loss, its pruning curve and the corpus's
    pruning curve all move by exactly 1."""
    model = request.getfixturevalue(which)
    order, keep = _order_and_keep(model, 0.25)
    before = (ablation.masked_loss(model, TEXT, keep), ablation.pruning_curve(model, TEXT, order, [0.25])[0],
              importance.pruning_curve(model, [TEXT, LONGER], order, [0.25])[0])
    real = heads_off_loss.losses
    monkeypatch.setattr(heads_off_loss, "losses", lambda *a, **k: real(*a, **k) + 1.0)
    after = (ablation.masked_loss(model, TEXT, keep), ablation.pruning_curve(model, TEXT, order, [0.25])[0],
             importance.pruning_curve(model, [TEXT, LONGER], order, [0.25])[0])
    np.testing.assert_allclose(np.subtract(after, before), 1.0, rtol=1e-6)


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_bert"])
def test_the_live_views_cross_entropy_is_the_one_places(request, which, monkeypatch):
    """`heads_off_loss.cross_entropy` made to answer its value + 1: the live view's loss moves by exactly 1, as
    the one text's loss does."""
    model = request.getfixturevalue(which)
    _, keep = _order_and_keep(model, 0.25)
    before = (outcome.ablated(model, TEXT, keep).loss, ablation.masked_loss(model, TEXT, keep))
    real = heads_off_loss.cross_entropy
    monkeypatch.setattr(heads_off_loss, "cross_entropy", lambda *a, **k: real(*a, **k) + 1.0)
    after = (outcome.ablated(model, TEXT, keep).loss, ablation.masked_loss(model, TEXT, keep))
    np.testing.assert_allclose(np.subtract(after, before), 1.0, rtol=1e-6)


def test_the_live_views_sentence_embedding_is_the_one_places(tiny_embedder, monkeypatch):
    """`heads_off_loss.embeddings` made to answer twice its value: the live view's embedding doubles too."""
    keep = np.ones((tiny_embedder.num_layers, tiny_embedder.num_heads), bool)
    before = outcome.unablated(tiny_embedder, TEXT).embedding
    real = heads_off_loss.embeddings
    monkeypatch.setattr(heads_off_loss, "embeddings", lambda *a, **k: 2 * real(*a, **k))
    after = outcome.ablated(tiny_embedder, TEXT, keep).embedding
    torch.testing.assert_close(after, 2 * before)


def test_the_embedding_loss_is_the_one_places(tiny_embedder, monkeypatch):
    """`heads_off_loss.embedding_loss` made to answer its value + 1: the live view's loss and the one text's
    loss (1 − cosine to the unablated embedding) both move by exactly 1."""
    model = tiny_embedder
    _, keep = _order_and_keep(model, 0.25)
    before = (outcome.ablated(model, TEXT, keep, base=outcome.unablated(model, TEXT)).loss,
              ablation.masked_loss(model, TEXT, keep))
    real = heads_off_loss.embedding_loss
    monkeypatch.setattr(heads_off_loss, "embedding_loss", lambda *a, **k: real(*a, **k) + 1.0)
    after = (outcome.ablated(model, TEXT, keep, base=outcome.unablated(model, TEXT)).loss,
             ablation.masked_loss(model, TEXT, keep))
    np.testing.assert_allclose(np.subtract(after, before), 1.0, rtol=1e-5)
