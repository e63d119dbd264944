"""Corpus head importance (mha_viz.corpus.importance): a padded batch of mixed-length documents
gives the sum of the per-text scores of mha_viz.interventions.ablation, and the held-out pruning curve their
mean, for a decoder (random GPT-2, toy-induction), a masked-LM encoder (random BERT) and an
embedding-only encoder (minilm)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mha_viz
from mha_viz.corpus import importance
from mha_viz.interventions import ablation
from mha_viz.text import loss_inputs

WORDS = [  # mixed lengths, one of them a single token for the byte-level GPT-2 tokenizer
    "the cat sat on the mat and the dog sat on the log",
    "hello world",
    "attention heads look at tokens; some look back, some look at the start",
    "t",
    "a quick brown fox jumps over the lazy dog! hello attention, hello heads 123 456",
]
LETTERS = ["a b c d a b c d", "x y z x y z q r s q r s", "a", "m n o p m n o p m n o p", "k l"]


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def _per_text(model, texts) -> np.ndarray:
    """What the issue defines: each text's own importance before normalisation, summed."""
    total = np.zeros((model.num_layers, model.num_heads))
    for text in texts:
        if loss_inputs.loss_kind(model) == loss_inputs.EMBEDDING:
            total += np.clip(ablation.ablation_effects(model, text, max_tokens=128), 0, None)
            continue
        try:
            total += ablation.head_gradients(model, text, max_tokens=128)[1]
        except mha_viz.InputError:  # a decoder's one-token text scores nothing
            pass
    return total


def _has_loss(model, text) -> bool:
    try:
        loss_inputs.prepare(model, text)
    except mha_viz.InputError:
        return False
    return True


def _check_sum(model, texts):
    got = importance.batch_importance(model, texts, max_tokens=128)
    want = _per_text(model, texts)
    assert got.shape == (model.num_layers, model.num_heads) and (want > 0).any()
    # 1e-5 relative to the largest head: float32 rounding of a padded batch against one text at a time
    # (minilm's 1 − cosine of near-identical embeddings is the most sensitive, at about 2e-6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    return got


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_bert"])
def test_batch_is_the_sum_of_per_text_gradient_importances(request, which):
    _check_sum(request.getfixturevalue(which), WORDS)


def test_batch_is_the_sum_on_toy_induction(toy):
    _check_sum(toy, LETTERS)


@pytest.mark.model
@pytest.mark.parametrize("masks", [None, 2])  # as sized (one forward), and 2 masks a forward: 3 texts × 2 copies
def test_batch_is_the_sum_of_clipped_ablation_effects_on_minilm(minilm, monkeypatch, masks):
    if masks is not None:
        monkeypatch.setattr(ablation, "effect_rows", lambda _model, _n, texts=1, _masks=None: masks * texts)
    got = _check_sum(minilm, WORDS[:2] + ["Hello."])
    assert (got >= 0).all()


def test_gradient_batches_split_to_fit_the_memory_budget(tiny_gpt2, monkeypatch):
    """With 1 MiB, documents of about 30 tokens fit one at a time: the batch is cut in pieces and
    the sum is unchanged."""
    texts = [WORDS[0] + " " + WORDS[2], WORDS[4] + " the end", WORDS[2]]
    whole = importance.batch_importance(tiny_gpt2, texts)
    passes = []
    real = importance._gradient_importance
    monkeypatch.setattr(importance, "_gradient_importance", lambda m, b: passes.append(len(b)) or real(m, b))
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    np.testing.assert_allclose(importance.batch_importance(tiny_gpt2, texts), whole, rtol=1e-5)
    assert len(passes) > 1 and sum(passes) == len(texts)


def test_a_model_whose_heads_cannot_be_masked_is_unavailable(tiny_gpt2):
    blind = dataclasses.replace(tiny_gpt2, attention_modules=[])
    with pytest.raises(importance.Unavailable, match="cannot be switched off"):
        importance.batch_importance(blind, WORDS)


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_bert", "toy"])
def test_pruning_curve_is_the_mean_of_per_text_curves(request, which):
    model = request.getfixturevalue(which)
    texts = LETTERS if which == "toy" else WORDS
    L, H = model.num_layers, model.num_heads
    order = np.random.default_rng(0).permutation(L * H)
    fractions = [0.0, 0.25, 0.5, 0.9]
    got = importance.pruning_curve(model, texts, order, fractions, batch_size=2)
    scored = [t for t in texts if _has_loss(model, t)]
    assert len(scored) < len(texts) or which != "tiny_gpt2"  # its one-token text is left out of the mean
    want = np.mean([ablation.pruning_curve(model, t, order, fractions) for t in scored], axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got[-1] != got[0]  # masking heads changes the loss


@pytest.mark.model
def test_pruning_curve_on_minilm_starts_at_zero(minilm):
    order = np.arange(minilm.num_layers * minilm.num_heads)
    got = importance.pruning_curve(minilm, WORDS, order, [0.0, 0.5])
    want = np.mean([ablation.pruning_curve(minilm, t, order, [0.0, 0.5]) for t in WORDS], axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert abs(got[0]) < 1e-6 < got[1]  # 1 − cosine to itself, then a real change


def test_pruning_curve_without_any_scored_document_says_so(tiny_gpt2):
    one = next(t for t in ("t", "a", "x") if len(tiny_gpt2.tokenizer(t)["input_ids"]) == 1)
    with pytest.raises(mha_viz.InputError, match="too short"):
        importance.pruning_curve(tiny_gpt2, [one], [0], [0.0])


def test_a_reversed_order_prunes_as_its_copy_does(tiny_gpt2):
    """An order given as a reversed view (negative strides, `order[::-1]`) masks the same heads as its copy."""
    L, H = tiny_gpt2.num_layers, tiny_gpt2.num_heads
    order = np.random.default_rng(0).permutation(L * H)[::-1]
    fractions = [0.0, 0.5]
    got = importance.pruning_curve(tiny_gpt2, WORDS[:2], order, fractions)
    np.testing.assert_array_equal(got, importance.pruning_curve(tiny_gpt2, WORDS[:2], order.copy(), fractions))
    assert got[1] != got[0]
