"""Attribution patching (`mha_viz.interventions.estimate`): the estimate equals a first-order estimate made here
from hooks on the Hugging Face modules themselves (Llama's o_proj, GPT-2's c_proj), equals real
patching on a model with nothing nonlinear between z and the logits, keeps no gradient for the
parameters, and refuses what patching refuses, with a message, before the backward pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mha_viz
from mha_viz.interventions import ablation, attribution, estimate, patching, prediction
from mha_viz_models.families.builtin import output_projection
from tests.helpers import byte_bpe_tokenizer
from tests.models.architectures_2026 import BUILDERS, HYBRIDS, build
from tests.tolerance import assert_same_argmax

CLEAN, CORRUPTED = "one two three four five", "one two four three five"  # the same token count


def _w_o(model) -> list[nn.Module]:
    """Each softmax layer's W_O: as Hugging Face names it for Llama (o_proj) and GPT-2 (c_proj), the
    one mha-viz finds for the other architectures."""
    hf = model.hf_model
    if model.model_type == "gpt2":
        return [block.attn.c_proj for block in hf.transformer.h]
    if model.model_type == "llama":
        return [layer.self_attn.o_proj for layer in hf.model.layers]
    return [output_projection(m, fam) for m, fam in model.attention_modules]


def _z_and_grad(model, ids: torch.Tensor, a: int, b: int):
    """Each layer's W_O input (n, H, d_v) and ∂m/∂(that input), m = logit(a) − logit(b) at the last
    position: a zero tensor added to each W_O's input is what the gradient is taken against."""
    zs, deltas = [], []

    def add_delta(_module, args):
        delta = torch.zeros_like(args[0], requires_grad=True)
        zs.append(args[0].detach())
        deltas.append(delta)
        return (args[0] + delta, *args[1:])
    hooks = [m.register_forward_pre_hook(add_delta) for m in _w_o(model)]
    try:
        with torch.enable_grad():
            logits = model.hf_model(input_ids=ids).logits.float()
            m = logits[0, -1, a] - logits[0, -1, b]
            grads = torch.autograd.grad(m, deltas)
    finally:
        for h in hooks:
            h.remove()
    H = model.num_heads
    shaped = [t[0].reshape(t.shape[1], H, -1) for t in zs]
    return shaped, [g[0].reshape(g.shape[1], H, -1) for g in grads], float(m.detach())


def _by_hand(model, clean: str, corrupted: str, a: int, b: int, mode: str) -> np.ndarray:
    """(layers, heads, n): ⟨∂m/∂z(run), z(source) − z(run)⟩ over the gap, made from the hooks above."""
    ids = {t: torch.tensor([mha_viz.tokenize(model, t).ids]) for t in (clean, corrupted)}
    z_c, g_c, m_c = _z_and_grad(model, ids[clean], a, b)
    z_x, g_x, m_x = _z_and_grad(model, ids[corrupted], a, b)
    if mode == "denoise":
        delta = [((zc - zx) * g).sum(-1).T for zc, zx, g in zip(z_c, z_x, g_x)]
        return (torch.stack(delta) / (m_c - m_x)).numpy()
    delta = [((zx - zc) * g).sum(-1).T for zc, zx, g in zip(z_c, z_x, g_c)]
    return (-torch.stack(delta) / (m_c - m_x)).numpy()


@pytest.mark.parametrize("mode", ["denoise", "noise"])
@pytest.mark.parametrize("folder", ["llama_dir", "gpt2_dir"])
def test_the_estimate_equals_one_made_from_hooks_on_the_models_own_modules(folder, mode, request):
    model = mha_viz.load_model(request.getfixturevalue(folder), device="cpu")
    est = attribution.estimate_positions(model, CLEAN, CORRUPTED, mode=mode)
    n = len(mha_viz.tokenize(model, CLEAN).ids)
    assert est.values.shape == (model.num_layers, model.num_heads, n) and est.estimated
    want = _by_hand(model, CLEAN, CORRUPTED, est.answer, est.wrong, mode)
    assert np.abs(want).max() > 1e-3  # the heads move the metric at all
    gap = est.m_clean - est.m_corrupted  # compared as Δm, in logits: a random model's small gap magnifies
    np.testing.assert_allclose(est.values * gap, want * gap, atol=1e-4)  # float32's rounding in the fractions
    heads = attribution.estimate_heads(model, CLEAN, CORRUPTED, mode=mode)
    np.testing.assert_allclose(heads.values * gap, want.sum(-1) * gap, atol=1e-4)
    real = attribution.patch_heads(model, CLEAN, CORRUPTED, mode=mode)
    assert (heads.answer, heads.wrong, heads.m_clean) == (real.answer, real.wrong,
                                                          pytest.approx(real.m_clean, abs=1e-5))


@pytest.mark.parametrize("name", [n for n in BUILDERS if n != "deberta"] + list(HYBRIDS))
def test_every_family_whose_heads_are_read_is_estimated(name, tmp_path):
    """OLMo 2's post-norms, GPT-OSS's sinks, Cohere's logit scale, DeepSeek's MLA, Llama 4's chunks,
    the hybrids' linear-attention layers: the gradient flows through each as the model computes it."""
    model = mha_viz.load_model(build(name, tmp_path / name), device="cpu")
    est = attribution.estimate_positions(model, CLEAN, CORRUPTED)
    want = _by_hand(model, CLEAN, CORRUPTED, est.answer, est.wrong, "denoise")
    gap = est.m_clean - est.m_corrupted
    assert np.abs(want).max() > 1e-3
    np.testing.assert_allclose(est.values * gap, want * gap, atol=1e-4)


class _Zero(nn.Module):
    def forward(self, hidden_states, *args, **kwargs):
        return torch.zeros_like(hidden_states)


def _linear(kind: str, folder) -> mha_viz.LoadedModel:
    """A one-layer random-init model with nothing nonlinear between z and the logits: its MLP writes
    0 and its final norm is the identity."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    tok = byte_bpe_tokenizer()
    torch.manual_seed(7)
    if kind == "llama":
        net = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                           num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                           max_position_embeddings=64, initializer_range=0.3))
    else:
        net = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=64, n_layer=1, n_head=4,
                                         initializer_range=0.3))
    net.save_pretrained(folder)
    tok.save_pretrained(folder)
    model = mha_viz.load_model(str(folder), device="cpu")
    hf = model.hf_model
    if kind == "llama":
        hf.model.layers[0].mlp, hf.model.norm = _Zero(), nn.Identity()
    else:
        hf.transformer.h[0].mlp, hf.transformer.ln_f = _Zero(), nn.Identity()
    return model


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_on_a_linear_model_the_estimate_is_real_patching(kind, tmp_path):
    model = _linear(kind, tmp_path)
    for mode in ("denoise", "noise"):
        real = attribution.patch_heads(model, CLEAN, CORRUPTED, mode=mode)
        est = attribution.estimate_heads(model, CLEAN, CORRUPTED, mode=mode)
        assert np.abs(real.values).max() > 1e-2
        np.testing.assert_allclose(est.values, real.values, atol=1e-4)
        positions = attribution.estimate_positions(model, CLEAN, CORRUPTED, mode=mode)
        one = attribution.patch_positions(model, CLEAN, CORRUPTED, 0, 1, mode=mode)
        np.testing.assert_allclose(positions.values[0, 1], one.values, atol=1e-4)
        agree = attribution.agreement(est.values, real.values)
        assert agree.pearson > 0.9999 and not agree.differ.any()


def test_on_the_toy_model_saturated_attention_shows_as_disagreement():
    """Where real patching runs through an induction head's saturated softmax, the straight line
    misses: the estimate is close for the last layer's heads (linear from z on) and may not be
    for the first layer's."""
    toy = mha_viz.load_model("toy-induction", device="cpu")
    clean, corrupted = prediction.INDUCTION.clean, prediction.INDUCTION.corrupted
    real = attribution.patch_heads(toy, clean, corrupted, mode="noise")
    est = attribution.estimate_heads(toy, clean, corrupted, mode="noise")
    agree = attribution.agreement(est.values, real.values)
    assert agree.differ.any() and agree.where[0] == 0  # the previous-token head the induction head reads
    assert agree.largest == pytest.approx(float(np.abs(est.values - real.values).max()))


def test_no_parameter_requires_a_gradient_and_inference_mode_is_no_obstacle(llama_dir):
    model = mha_viz.load_model(llama_dir, device="cpu")
    assert not any(p.requires_grad for p in model.hf_model.parameters())  # the graph starts at the first z
    want = attribution.estimate_heads(model, CLEAN, CORRUPTED)
    with torch.inference_mode():  # a notebook cell inside inference mode
        inside = attribution.estimate_heads(model, CLEAN, CORRUPTED)
    np.testing.assert_array_equal(inside.values, want.values)


def test_our_mhas_weights_packed_in_inference_mode_serve_a_gradient_pass():
    """toy-induction runs our MHA, which packs W_Q, W_K, W_V once: a capture in inference mode
    packs them first, and the estimate's backward pass must still be able to save them."""
    toy = mha_viz.load_model("toy-induction", device="cpu")
    clean, corrupted = prediction.INDUCTION.clean, prediction.INDUCTION.corrupted
    mha_viz.analyze(toy, clean)  # packs the weights in inference mode
    est = attribution.estimate_heads(toy, clean, corrupted)
    assert np.isfinite(est.values).all() and np.abs(est.values).max() > 0.1


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_gives_the_float32_estimate_roughly(dtype):
    """The same metric (float32's answer and wrong token) estimated in half precision; the half model's
    own ends are float32's up to tokens whose float32 logits lie within half precision's rounding of the
    best: 0.1 of the largest logit (the bound tests/models/test_precision.py holds bfloat16's logit
    attribution to), twice that between two logits."""
    clean, corrupted = prediction.INDUCTION.clean, prediction.INDUCTION.corrupted
    toy = mha_viz.load_model("toy-induction", device="cpu")
    toy_half = mha_viz.load_model("toy-induction", device="cpu", dtype=dtype)
    full = attribution.estimate_positions(toy, clean, corrupted)
    half = attribution.estimate_positions(toy_half, clean, corrupted, full.answer, full.wrong)
    assert half.values.dtype == np.float32 and (half.answer, half.wrong) == (full.answer, full.wrong)
    assert np.corrcoef(full.values.ravel(), half.values.ravel())[0, 1] > 0.95
    np.testing.assert_allclose(half.values.sum(-1), full.values.sum(-1), atol=0.1)
    own = patching.measured_ends(toy_half, clean, corrupted)
    logits_c, logits_x = (toy.capture(torch.tensor([mha_viz.tokenize(toy, t).ids])).output.logits[0, -1].numpy()
                          for t in (clean, corrupted))
    assert_same_argmax(own.a, logits_c, 2 * 0.1 * max(1.0, np.abs(logits_c).max()), "answer")
    others = np.where(np.arange(logits_x.size) == own.a, -np.inf, logits_x)  # the corrupted run's best but it
    assert_same_argmax(own.b, others, 2 * 0.1 * max(1.0, np.abs(logits_x).max()), "wrong token")


def test_what_patching_refuses_the_estimate_refuses(llama_dir, bert_dir, monkeypatch):
    model = mha_viz.load_model(llama_dir, device="cpu")
    with pytest.raises(mha_viz.InputError, match="same number of tokens"):
        attribution.estimate_heads(model, CLEAN, "one two")
    with pytest.raises(mha_viz.InputError, match="same logit difference"):
        attribution.estimate_heads(model, CLEAN, CLEAN)
    with pytest.raises(mha_viz.InputError, match="give a single token"):
        attribution.estimate_positions(model, CLEAN, CORRUPTED, answer=" three four five")
    with pytest.raises(mha_viz.InputError, match="not a decoder"):
        attribution.estimate_heads(mha_viz.load_model(bert_dir, device="cpu"), "a b", "c d")
    with pytest.raises(ValueError, match="mode"):
        attribution.estimate_heads(model, CLEAN, CORRUPTED, mode="both")
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    monkeypatch.setattr(ablation, "gradient_bytes", lambda model, n, **_: 3 * 2**20)
    ran = []
    hook = model.hf_model.register_forward_pre_hook(lambda *_: ran.append(1))
    try:
        with pytest.raises(ablation.GradientBudget, match=r"Estimating every head .* 3\.0 MiB .*1\.0 MiB"):
            attribution.estimate_heads(model, CLEAN, CORRUPTED)
    finally:
        hook.remove()
    assert not ran  # refused before any pass


def test_agreement_reads_correlations_and_the_heads_that_differ():
    real = np.array([[0.0, 0.5], [1.0, 0.25]])
    est = np.array([[0.05, 0.3], [0.875, 0.125]])  # 0.05, 0.2, 0.125, 0.125 apart (exact in binary but 0.05)
    agree = estimate.agreement(est, real)
    assert agree.pearson == pytest.approx(np.corrcoef(est.ravel(), real.ravel())[0, 1])
    assert agree.spearman == pytest.approx(1.0)  # the same order
    assert agree.differ.tolist() == [[False, True], [True, True]]
    assert agree.where == (0, 1) and agree.largest == pytest.approx(0.2)
    assert not estimate.agreement(est, real, threshold=0.2).differ.any()  # 0.2 exactly is not more than 0.2
    flat = estimate.agreement(np.zeros((2, 2)), real)
    assert np.isnan(flat.pearson) and np.isnan(flat.spearman)
