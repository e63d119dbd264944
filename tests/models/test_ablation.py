"""Switching heads off (mha_viz.ablation): gradient importance against finite differences,
a fully masked layer against its output projection's bias, and pruning by importance against
random pruning on SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz import ablation
from models.adapters import output_projection
from models.masking import head_mask

TEXT = "the cat sat on the mat and the dog sat on the log"


def _loss_at(model, inputs, scale: torch.Tensor) -> float:
    with torch.no_grad():
        return float(ablation._loss_under(model, inputs, scale.double().float()))


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_bert"])
def test_gradient_of_the_head_mask_matches_finite_differences(request, which):
    model = request.getfixturevalue(which)
    grad, per_token = ablation.head_gradients(model, TEXT)
    inputs = ablation.prepare(model, TEXT)
    L, H = model.num_layers, model.num_heads
    eps = 1e-2
    fd = np.zeros((L, H))
    for layer in range(L):
        for head in range(H):
            up, down = torch.ones(L, H), torch.ones(L, H)
            up[layer, head] += eps
            down[layer, head] -= eps
            fd[layer, head] = (_loss_at(model, inputs, up) - _loss_at(model, inputs, down)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, atol=2e-3, rtol=2e-2)
    # Michel's per-token absolute sum is at least |Σ_t| = |∂L/∂ξ| / n, with equality only when
    # every token's contribution has the same sign
    assert (per_token + 1e-7 >= np.abs(grad) / inputs.ids.shape[1]).all()
    imp = ablation.head_importance(model, TEXT)
    np.testing.assert_allclose(np.linalg.norm(imp, axis=1), 1.0, rtol=1e-6)


def test_importance_of_one_scored_token_is_the_normalised_gradient(tiny_gpt2):
    """Two tokens (BOS and a word): only position 0 predicts anything, so the per-token sum has one term and the
    importance is |∂L/∂ξ| row-normalised."""
    tok = tiny_gpt2.tokenizer
    text = next(t for t in ("the cat", "hello world", "cat sat", "the mat", "dog")
                if len(tok(t)["input_ids"]) == 2)
    grad, _ = ablation.head_gradients(tiny_gpt2, text)
    expected = np.abs(grad) / np.linalg.norm(np.abs(grad), axis=1, keepdims=True)
    np.testing.assert_allclose(ablation.head_importance(tiny_gpt2, text), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_bert"])
def test_masking_every_head_of_a_layer_leaves_the_output_projection_bias(request, which):
    model = request.getfixturevalue(which)
    inputs = ablation.prepare(model, TEXT)
    layer = 1
    w_o = output_projection(*model.attention_modules[layer])
    seen = []
    hook = w_o.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
    scale = torch.ones(model.num_layers, model.num_heads)
    scale[layer] = 0.0
    try:
        with torch.no_grad(), head_mask(model, scale):
            ablation._forward(model, inputs)
    finally:
        hook.remove()
    bias = w_o.bias.detach()
    assert seen and torch.allclose(seen[0], bias.expand_as(seen[0]), atol=1e-6)
    keep = np.ones((model.num_layers, model.num_heads), bool)
    full = ablation.masked_loss(model, TEXT, keep)
    keep[layer] = False
    assert ablation.masked_loss(model, TEXT, keep) != full  # and the loss does change


def test_masked_lm_masks_fixed_positions(tiny_bert):
    inputs = ablation.prepare(tiny_bert, TEXT)
    scored = (inputs.labels[0] != -100).nonzero().ravel().tolist()
    assert scored == [3, 9]  # non-special positions 1..12: the 3rd and the 9th
    assert all(inputs.ids[0, i] == tiny_bert.tokenizer.mask_token_id for i in scored)


@pytest.mark.model
def test_embedding_loss_is_zero_with_every_head_and_grows_when_heads_go(minilm):
    keep = np.ones((minilm.num_layers, minilm.num_heads), bool)
    assert ablation.loss_kind(minilm) == ablation.EMBEDDING
    assert abs(ablation.masked_loss(minilm, TEXT, keep)) < 1e-6
    keep[:, ::2] = False
    assert ablation.masked_loss(minilm, TEXT, keep) > 1e-3


@pytest.mark.model
def test_pruning_by_importance_beats_random_pruning_on_smollm2(smollm2):
    imp = ablation.head_importance(smollm2, ablation.SAMPLE_PARAGRAPH)
    N = imp.size
    by_importance = np.argsort(imp.ravel())  # least important first
    loss_imp = ablation.pruning_curve(smollm2, ablation.SAMPLE_PARAGRAPH, by_importance, [0.3])[0]
    rng = np.random.default_rng(0)
    random_losses = [ablation.pruning_curve(smollm2, ablation.SAMPLE_PARAGRAPH, rng.permutation(N), [0.3])[0]
                     for _ in range(5)]
    base = ablation.pruning_curve(smollm2, ablation.SAMPLE_PARAGRAPH, by_importance, [0.0])[0]
    assert base < loss_imp < np.mean(random_losses)


def test_predictions_with_mean_ablation_replace_the_heads_by_their_mean(tiny_gpt2):
    """Mean-ablation needs each head's mean output before predicting (it used to crash on a
    decoder); with every head kept the prediction is the unablated one, with heads replaced by
    their mean it differs."""
    keep = np.ones((tiny_gpt2.num_layers, tiny_gpt2.num_heads), dtype=bool)
    same = ablation.predictions(tiny_gpt2, TEXT, keep, mean_ablation=True)
    assert same[0].before == same[0].after
    keep[:, :2] = False
    changed = ablation.predictions(tiny_gpt2, TEXT, keep, mean_ablation=True)
    assert changed[0].before == same[0].before and changed[0].after != changed[0].before
    zeroed = ablation.predictions(tiny_gpt2, TEXT, keep)  # the same heads zeroed instead
    assert changed[0].after != zeroed[0].after


def test_a_gradient_pass_over_the_memory_budget_is_refused_before_it_runs(tiny_gpt2, monkeypatch):
    n = len(mha_viz.tokenize(tiny_gpt2, TEXT).ids)
    need = ablation.gradient_bytes(tiny_gpt2, n)
    assert ablation.gradient_bytes(tiny_gpt2, 2 * n) > 2 * need  # the n² terms show
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    monkeypatch.setattr(ablation, "gradient_bytes", lambda model, n: 3 * 2**20)
    ran = []
    monkeypatch.setattr(ablation, "_loss_under", lambda *a, **k: ran.append(1))
    with pytest.raises(mha_viz.InputError, match=r"3\.0 MiB .*1\.0 MiB"):
        ablation.head_importance(tiny_gpt2, TEXT)
    assert not ran  # refused before any forward or backward pass
