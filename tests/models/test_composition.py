"""Composition and copying scores from the weights (`mha_viz.circuits.composition`), against dense products
written out here from the Hugging Face model's own parameters, norms folded by hand: the scores of every
pair of heads of GPT-2 (LayerNorm: scaled and centred) and of a Llama with grouped-query attention
(RMSNorm), NaN where the writer is not earlier; the copying score of the full vocab × vocab OV circuit;
planted heads whose OV circuit is a projection copy (1) or suppress (−1); random heads do neither."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.circuits import composition
from mha_viz.text.tokenize import InputError
from mha_viz_models.errors import UnsupportedArchitecture
from tests.helpers import byte_bpe_tokenizer

F64 = torch.float64


def _perturbed(folder, tmp_path, model_cls, seed: int):
    """The random-init model of `folder` with every norm's weight (and bias) moved away from its init, so
    that a fold left out, or done wrongly, shows; saved and loaded again through mha-viz."""
    hf = model_cls.from_pretrained(folder)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "ln" in name or "norm" in name:
                p.copy_((1 + 0.5 * torch.randn(p.shape, generator=gen)) if name.endswith("weight")
                        else 0.3 * torch.randn(p.shape, generator=gen))
    out = tmp_path / f"perturbed-{seed}"
    hf.save_pretrained(out)
    byte_bpe_tokenizer().save_pretrained(out)
    return mha_viz.load_model(str(out), device="cpu")


def _ln(w: torch.Tensor, gamma: torch.Tensor, centre: bool) -> torch.Tensor:
    """diag(γ) w (d, k), centred over the d rows for a LayerNorm: what reads the stream through it."""
    w = gamma.double()[:, None] * w.double()
    return w - w.mean(0) if centre else w


def _gpt2_heads(hf, fold: bool = True):
    """Per layer (W_Q, W_K, W_V, W_O) per head (H, …) from c_attn and c_proj (x @ W), ln_1 folded."""
    d, H = hf.config.n_embd, hf.config.n_head
    layers = []
    for block in hf.transformer.h:
        w = block.attn.c_attn.weight.detach().double()  # (d, 3d): q | k | v
        w = _ln(w, block.ln_1.weight.detach(), True) if fold else w
        q, k, v = (w[:, i * d:(i + 1) * d].reshape(d, H, -1).permute(1, 0, 2) for i in range(3))
        layers.append((q, k, v, block.attn.c_proj.weight.detach().double().reshape(H, -1, d)))
    return layers


def _llama_heads(hf, fold: bool = True):
    """Per layer (W_Q, W_K, W_V, W_O) per query head (H, …), each query head with its K/V group's, the input
    RMSNorm folded."""
    cfg = hf.config
    d, H, G = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    kv = torch.arange(H) // (H // G)
    layers = []
    for layer in hf.model.layers:
        gamma = layer.input_layernorm.weight.detach() if fold else torch.ones(d)
        a = layer.self_attn
        q, k, v = (_ln(p.weight.detach().T, gamma, False).reshape(d, n, -1).permute(1, 0, 2)
                   for p, n in ((a.q_proj, H), (a.k_proj, G), (a.v_proj, G)))
        layers.append((q, k[kv], v[kv], a.o_proj.weight.detach().double().T.reshape(H, -1, d)))
    return layers


def _gemma3_heads(hf):
    """The same for Gemma 3, every norm's γ 1 + its weight: the input norm's on W_Q, W_K, W_V's rows, the
    q and k norms' on W_Q's and W_K's columns, the post-attention norm's on W_O's columns."""
    cfg = hf.config
    d, H, G = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    kv = torch.arange(H) // (H // G)
    layers = []
    for layer in hf.model.layers:
        a = layer.self_attn
        q, k, v = (_ln(p.weight.detach().T, 1 + layer.input_layernorm.weight.detach(), False)
                   .reshape(d, n, -1).permute(1, 0, 2) for p, n in ((a.q_proj, H), (a.k_proj, G), (a.v_proj, G)))
        q, k = q * (1 + a.q_norm.weight.detach().double()), k * (1 + a.k_norm.weight.detach().double())
        o = a.o_proj.weight.detach().double().T.reshape(H, -1, d) * (1 + layer.post_attention_layernorm.weight.detach())
        layers.append((q, k[kv], v[kv], o.double()))
    return layers


def _gemma3(tmp_path):
    """A random-init Gemma 3 (3 layers, 4 query heads, 2 K/V heads, tied embeddings), norms perturbed."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tok = byte_bpe_tokenizer()
    config = Gemma3TextConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                              sliding_window=8, final_logit_softcapping=None, attn_logit_softcapping=None)
    torch.manual_seed(5)
    folder = tmp_path / "gemma3"
    Gemma3ForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return _perturbed(folder, tmp_path, Gemma3ForCausalLM, 6)


def _dense_scores(layers) -> dict[str, np.ndarray]:
    """Every pair's scores from d × d products: ‖A B‖_F / (‖A‖_F ‖B‖_F)."""
    L, H = len(layers), len(layers[0][0])
    ov = [[v[h] @ o[h] for h in range(H)] for _, _, v, o in layers]
    qk = [[q[h] @ k[h].T for h in range(H)] for q, k, _, _ in layers]
    out = {kind: np.full((L, H, L, H), np.nan) for kind in "qkv"}
    for l1 in range(L):
        for l2 in range(l1 + 1, L):
            for h1 in range(H):
                for h2 in range(H):
                    a = ov[l1][h1]
                    for kind, b in (("q", qk[l2][h2]), ("k", qk[l2][h2].T), ("v", ov[l2][h2])):
                        out[kind][l1, h1, l2, h2] = float(torch.linalg.norm(a @ b) / (a.norm() * b.norm()))
    return out


def _check_composition(model, heads, unfolded):
    scores = composition.composition_scores(model)
    want = _dense_scores(heads)
    L, H = model.num_layers, model.num_heads
    later = np.arange(L)[:, None, None, None] < np.arange(L)[None, None, :, None]  # l1 < l2
    later = np.broadcast_to(later, (L, H, L, H))
    for kind in "qkv":
        got = scores[kind]
        assert got.dtype == np.float32 and got.shape == (L, H, L, H)
        assert np.isnan(got[~later]).all() and np.isfinite(got[later]).all()
        np.testing.assert_allclose(got[later], want[kind][later], atol=1e-5, rtol=0)
        assert 0 < got[later].min() and got[later].max() < 1
        # the folds matter here: the same products on the raw weights are far from the scores
        assert np.abs(_dense_scores(unfolded)[kind][later] - got[later]).max() > 1e-3


def test_gpt2_composition_scores_match_dense_products_with_layernorm_folded(gpt2_dir, tmp_path):
    from transformers import GPT2LMHeadModel

    model = _perturbed(gpt2_dir, tmp_path, GPT2LMHeadModel, 0)
    _check_composition(model, _gpt2_heads(model.hf_model), _gpt2_heads(model.hf_model, fold=False))


def test_llama_gqa_composition_scores_match_dense_products_with_rmsnorm_folded(llama_dir, tmp_path):
    from transformers import LlamaForCausalLM

    model = _perturbed(llama_dir, tmp_path, LlamaForCausalLM, 1)
    assert model.num_kv_heads < model.num_heads  # grouped-query attention: 8 query heads read 2 K/V heads
    _check_composition(model, _llama_heads(model.hf_model), _llama_heads(model.hf_model, fold=False))


def test_gemma3_composition_and_copying_fold_the_qk_and_post_attention_norms(tmp_path):
    """Gemma 3: RMSNorms of scale 1 + weight before the attention, on each head's q and k, and between the
    attention's output and the stream; and the final norm into the tied W_U for copying."""
    model = _gemma3(tmp_path)
    hf = model.hf_model
    _check_composition(model, _gemma3_heads(hf), _llama_heads(hf, fold=False))
    w_e = hf.model.embed_tokens.weight.detach().double()
    w_u = _ln(hf.lm_head.weight.detach().T, 1 + hf.model.norm.weight.detach(), False)
    want = [[_full_ov_score(w_e, v[h], o[h], w_u) for h in range(len(v))] for _, _, v, o in _gemma3_heads(hf)]
    np.testing.assert_allclose(composition.copying_scores(model), want, atol=1e-5, rtol=0)


def test_the_baseline_is_the_mean_score_of_random_matrices_of_the_models_shapes(llama_dir, tmp_path):
    """Against an independent Monte Carlo of dense products (numpy's generator, not torch's), within four
    standard errors; seeded, so the same numbers twice; and V-composition of random matrices is not 0."""
    model = mha_viz.load_model(str(llama_dir), device="cpu")
    base = composition.composition_baseline(model, seed=3, samples=200)
    assert base == composition.composition_baseline(model, seed=3, samples=200)
    d, d_k = model.d_model, model.d_k
    rng = np.random.default_rng(0)
    draws = {kind: [] for kind in "qkv"}
    for _ in range(400):
        q1, k1, v1, q2, k2, v2 = (rng.normal(size=(d, d_k)) for _ in range(6))
        o1, o2 = rng.normal(size=(d_k, d)), rng.normal(size=(d_k, d))
        a = v1 @ o1
        for kind, b in (("q", q2 @ k2.T), ("k", k2 @ q2.T), ("v", v2 @ o2)):
            draws[kind].append(np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    for kind in "qkv":
        mean, se = np.mean(draws[kind]), np.std(draws[kind]) / np.sqrt(len(draws[kind]))
        assert abs(base[kind] - mean) < 4 * se + 1e-3, (kind, base[kind], mean, se)
        assert 0.05 < base[kind] < 0.5


def _full_ov_score(w_e, v, o, w_u) -> float:
    """Σλ / Σ|λ| over the eigenvalues of the vocab × vocab circuit W_E W_V W_O W_U itself."""
    lam = torch.linalg.eigvals(w_e @ v @ o @ w_u)
    return float(lam.real.sum() / lam.abs().sum())


def test_gpt2_copying_scores_match_the_full_vocab_by_vocab_circuit(gpt2_dir, tmp_path):
    """Every head of GPT-2 (tied embeddings) against the eigenvalues of its (vocab × vocab) circuit, with
    ln_1 folded into W_V and ln_f into W_U (scaled, centred)."""
    from transformers import GPT2LMHeadModel

    model = _perturbed(gpt2_dir, tmp_path, GPT2LMHeadModel, 2)
    hf = model.hf_model
    w_e = hf.transformer.wte.weight.detach().double()  # (vocab, d)
    w_u = _ln(hf.lm_head.weight.detach().T, hf.transformer.ln_f.weight.detach(), True)  # (d, vocab)
    got = composition.copying_scores(model)
    assert got.shape == (model.num_layers, model.num_heads) and got.dtype == np.float32
    want = np.array([[_full_ov_score(w_e, v[h], o[h], w_u) for h in range(len(v))]
                     for _, _, v, o in _gpt2_heads(hf)])
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    unfolded = _full_ov_score(w_e, *(x[0] for x in _gpt2_heads(hf, fold=False)[0][2:]), w_e.T)
    assert abs(unfolded - want[0, 0]) > 1e-3  # the folds change the score: the check above sees them


def _planted_llama(tmp_path):
    """A tied-embedding Llama (4 query heads, 2 K/V heads, norms 1) whose layer 1 head 2 has W_V W_O = U Uᵀ
    (U: d × d_v, orthonormal columns), a projection, and layer 0 head 0 W_V W_O = −U Uᵀ."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = byte_bpe_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=True)
    torch.manual_seed(4)
    hf = LlamaForCausalLM(config)
    d_v = 64 // 4
    with torch.no_grad():
        for layer, head, sign in ((1, 2, 1.0), (0, 0, -1.0)):
            u = torch.linalg.qr(torch.randn(64, d_v)).Q  # (d, d_v)
            attn = hf.model.layers[layer].self_attn
            group = head // 2
            attn.v_proj.weight[group * d_v:(group + 1) * d_v] = u.T  # W_V[group] = U
            attn.o_proj.weight[:, head * d_v:(head + 1) * d_v] = sign * u  # W_O[head] = ±Uᵀ
    folder = tmp_path / "planted-llama"
    hf.save_pretrained(folder)
    tok.save_pretrained(folder)
    return mha_viz.load_model(str(folder), device="cpu")


def test_a_projection_ov_circuit_copies_and_random_heads_do_not(tmp_path):
    """W_U = W_Eᵀ and W_V W_O = U Uᵀ: the full circuit (W_E U)(W_E U)ᵀ is positive semi-definite, score 1;
    −U Uᵀ: −1. The six random heads (their own W_O; head 3 shares the planted head's W_V) score within ±0.3
    and, on average in absolute value, under 0.2 (measured: 0.03 to 0.12)."""
    model = _planted_llama(tmp_path)
    assert model.hf_model.lm_head.weight is model.hf_model.model.embed_tokens.weight  # tied
    got = composition.copying_scores(model)
    assert got[1, 2] == pytest.approx(1.0, abs=1e-4)
    assert got[0, 0] == pytest.approx(-1.0, abs=1e-4)
    rest = np.delete(got.ravel(), [0, 6])
    assert np.abs(rest).max() < 0.3 and np.abs(rest).mean() < 0.2, rest


def test_an_encoders_copying_score_reads_its_masked_lm_decoder(bert_dir):
    """BERT (post-norm: the raw weights) against its circuit with the MLM head's decoder as W_U: its vocabulary
    is MiniLM's 30,522 tokens, so the eigenvalues are those of V O W_U W_E (d × d, the same nonzero ones)."""
    model = mha_viz.load_model(str(bert_dir), device="cpu")
    hf = model.hf_model
    w_e = hf.get_input_embeddings().weight.detach().double()
    w_u = hf.get_output_embeddings().weight.detach().double().T
    H = model.num_heads
    att = hf.bert.encoder.layer[0].attention
    v = att.self.value.weight.detach().double().T.reshape(64, H, -1).permute(1, 0, 2)
    o = att.output.dense.weight.detach().double().T.reshape(H, -1, 64)
    got = composition.copying_scores(model)
    want = [_full_ov_score(torch.eye(64, dtype=F64), v[h], o[h], w_u @ w_e) for h in range(H)]
    np.testing.assert_allclose(got[0], want, atol=1e-5)


def test_models_without_one_stream_are_refused(t5_dir):
    model = mha_viz.load_model(str(t5_dir), device="cpu")
    with pytest.raises(InputError, match="encoder–decoder"):
        composition.copying_scores(model)
    with pytest.raises(UnsupportedArchitecture, match="encoder–decoder"):
        composition.composition_scores(model)


def test_the_toys_induction_heads_read_the_previous_token_head_by_k_composition():
    """toy-induction, trained: each layer-1 head's strongest K-composition comes from the layer-0
    previous-token head (found from its attention), above the random baseline; its layer-1 heads copy."""
    toy = mha_viz.load_model("toy-induction", device="cpu")
    run = mha_viz.analyze(toy, "q w e r t y u i q w e r t y u i")
    a = run.attentions
    previous = int(np.argmax([np.mean([a[0, h, p, p - 1] for p in range(1, a.shape[-1])])
                              for h in range(toy.num_heads)]))
    k = composition.composition_scores(toy)["k"]
    base = composition.composition_baseline(toy)["k"]
    assert all(int(np.argmax(k[0, :, 1, h])) == previous for h in range(toy.num_heads))
    assert k[0, previous, 1].min() > 1.5 * base
    assert composition.copying_scores(toy)[1].min() > 0.9
