"""Every per-head feature on the families that change q, k or the scores: Qwen3 (per-head q/k
RMSNorm), Gemma 2 (logit soft-capping, a query pre-attention scalar, sliding and global layers),
Mistral (a sliding window on every layer), GPT-NeoX/Pythia (fused q, k, v interleaved per head,
partial rotary), Phi-3 (fused q, k, v blocked, grouped-query, partial rotary, a window), OPT (q
scaled inside the module, out_proj), DistilBERT (an encoder: q_lin … out_lin), GPT-J (rotary in
adjacent pairs on part of each head, from the module's own table), ALBERT (one attention module
shared by every layer, its residual and LayerNorm inside), Falcon (fused q, k, v in its three
layouts: one key/value head, grouped per key/value head, interleaved per head), ModernBERT (an
encoder: fused q, k, v, rotary, local layers that see a few tokens either side), and the 2025–2026
architectures of `architectures_2026`: OLMo 2 (q/k norms over every head at once), SmolLM3 (layers
without RoPE), GPT-OSS (sink logits, RoPE's angles given once), Cohere 2 (RoPE in adjacent pairs on
its sliding layers, none on its global one), Llama 4 (chunks, complex RoPE angles, an L2 q/k norm,
a query temperature on its layer without RoPE); DeepSeek-V3's multi-head latent attention and
DeBERTa's disentangled attention are refused by name. Tiny random-init models with peaked heads
(q/k weights scaled up, so a wrong scale, norm or window cannot hide in near-uniform rows), and
for each, against Hugging Face's own eager attention on the same ids:
- our MHA in place of theirs: the same probabilities and logits (1e-5);
- lean capture (fused run, probabilities recomputed): the same probabilities;
- each head's output z through W_O (and its bias) is the attention module's output;
- the teaching walkthrough's probabilities are the captured ones (and its scores, soft-capped),
  and so are the queries-and-keys view's rows;
- head weights are read."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import patching
from mha_viz.views import qk, teaching
from mha_viz_models import ModelLoadError
from mha_viz_models.families.builtin import output_projection
from tests.helpers import hidden_states, save_peaked
from tests.models import architectures_2026

TEXT = "The cat sat on the mat. The dog sat on the log. A quick brown fox jumps over the lazy dog!"
WINDOW = 8
EXTRA_SHARP = {"albert": 4.0}  # its first layer reads small, LayerNorm-ed embeddings
SHARP = 12.0  # q/k projections (or their norms' weights) scaled by this: peaked heads


def _qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM
    return Qwen3ForCausalLM, Qwen3Config(
        vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=128)


def _gemma2():
    from transformers import Gemma2Config, Gemma2ForCausalLM
    return Gemma2ForCausalLM, Gemma2Config(
        vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=128, sliding_window=WINDOW,
        query_pre_attn_scalar=24, attn_logit_softcapping=5.0, final_logit_softcapping=30.0)


def _mistral():
    from transformers import MistralConfig, MistralForCausalLM
    return MistralForCausalLM, MistralConfig(
        vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, sliding_window=WINDOW)


def _neox():  # Pythia's architecture: fused qkv interleaved per head, a quarter of each head rotated
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    return GPTNeoXForCausalLM, GPTNeoXConfig(
        vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=128)


def _phi3():  # fused qkv blocked [Q | K | V], grouped-query, half of each head rotated, a window
    from transformers import Phi3Config, Phi3ForCausalLM
    return Phi3ForCausalLM, Phi3Config(
        vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, partial_rotary_factor=0.5, sliding_window=WINDOW,
        pad_token_id=0)


def _opt():  # q scaled by 1/√d inside the module (bias included), learned positions, out_proj
    from transformers import OPTConfig, OPTForCausalLM
    return OPTForCausalLM, OPTConfig(
        vocab_size=400, hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=128, word_embed_proj_dim=64)


def _distilbert():  # an encoder: q_lin … out_lin, no mask at all on a single text
    from transformers import DistilBertConfig, DistilBertForMaskedLM
    return DistilBertForMaskedLM, DistilBertConfig(
        vocab_size=400, dim=64, hidden_dim=128, n_layers=2, n_heads=4, max_position_embeddings=128)


def _gptj():  # rotary in adjacent pairs on the first 8 of each head's 16 dimensions, from its own table
    from transformers import GPTJConfig, GPTJForCausalLM
    return GPTJForCausalLM, GPTJConfig(
        vocab_size=400, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=128)


def _albert():  # one attention module shared by all 3 layers (called 3 times), post-LayerNorm inside it
    from transformers import AlbertConfig, AlbertForMaskedLM
    return AlbertForMaskedLM, AlbertConfig(
        vocab_size=400, embedding_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=4, max_position_embeddings=128)


def _modernbert():  # an encoder: fused q, k, v, rotary, local layers seeing ±4 tokens, a global one every third
    from transformers import ModernBertConfig, ModernBertForMaskedLM
    return ModernBertForMaskedLM, ModernBertConfig(
        vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
        max_position_embeddings=128, local_attention=2 * WINDOW // 2, global_attn_every_n_layers=3,
        pad_token_id=0, eos_token_id=0, bos_token_id=0, cls_token_id=0, sep_token_id=0)


def _falcon(**layout):
    def build():  # fused q, k, v in one of Falcon's three layouts, full rotary
        from transformers import FalconConfig, FalconForCausalLM
        return FalconForCausalLM, FalconConfig(
            vocab_size=400, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=128,
            alibi=False, bias=True, **layout)
    return build


BUILDERS = {"qwen3": _qwen3, "gemma2": _gemma2, "mistral": _mistral, "neox": _neox, "phi3": _phi3,
            "opt": _opt, "distilbert": _distilbert, "gptj": _gptj, "albert": _albert,
            "falcon-mq": _falcon(multi_query=True, new_decoder_architecture=False),  # one K/V head (Falcon-7B)
            "falcon-new": _falcon(new_decoder_architecture=True, num_kv_heads=2),  # grouped per K/V head (40B)
            "falcon-mha": _falcon(multi_query=False, new_decoder_architecture=False),  # interleaved per head
            "modernbert": _modernbert}
SHARPENED = ("q_proj.weight", "k_proj.weight", "query_key_value.weight", "qkv_proj.weight", "q_lin.weight",
             "k_lin.weight", "attention.query.weight", "attention.key.weight", "Wqkv.weight")


def _build(family: str, out) -> str:
    """A random-init model of `family` with peaked heads, saved with its tokenizer to `out`."""
    cls, config = BUILDERS[family]()
    return save_peaked(cls, config, out, sharpened=SHARPENED, scale=SHARP * EXTRA_SHARP.get(family, 1.0), norm=SHARP)


@pytest.fixture(scope="module", params=list(BUILDERS))
def folder(request, tmp_path_factory):
    return request.param, _build(request.param, tmp_path_factory.mktemp(request.param))


def _ids(model) -> torch.Tensor:
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    assert ids.shape[1] > 2 * WINDOW  # past the window
    return ids


def test_our_mha_and_lean_capture_equal_hugging_face(folder):
    family, path = folder
    hf = mha_viz.load_model(path, device="cpu")
    assert hf.has_head_outputs, family
    ids = _ids(hf)
    eager = hf.capture(ids)
    probs = torch.stack([a[0] for a in eager.attentions])  # (L, H, n, n)
    assert probs.amax(-1).mean() > 0.5, "heads are not peaked: the test could not see a wrong scale"
    if family in ("gemma2", "mistral", "phi3"):  # a window of 8 on (some) layers: keys 8 or more back get nothing
        assert torch.tril(probs[0], -WINDOW).abs().max() == 0
        if family == "gemma2":  # its last layer is global: keys far back still get attention
            assert torch.tril(probs[-1], -WINDOW).abs().max() > 0
    if family == "modernbert":  # a local layer sees 4 tokens either side; layer 0 is global
        band = WINDOW // 2
        assert torch.triu(probs[1], band + 1).abs().max() == 0 and torch.tril(probs[1], -band - 1).abs().max() == 0
        assert torch.triu(probs[0], band + 1).abs().max() > 0
    ours = mha_viz.load_model(path, device="cpu", local_attention=True)
    mine = ours.capture(ids)
    for layer in range(hf.num_layers):
        torch.testing.assert_close(mine.attentions[layer], eager.attentions[layer], atol=1e-5, rtol=0)
    torch.testing.assert_close(mine.output.logits, eager.output.logits, atol=1e-5, rtol=1e-5)
    for layer in range(hf.num_layers):  # each head's output z, read from ours as from theirs
        torch.testing.assert_close(mine.head_outputs[layer], eager.head_outputs[layer], atol=1e-5, rtol=1e-5)
    for model in (hf, ours):
        lean = model.capture(ids, lean=True)
        for layer in range(model.num_layers):
            torch.testing.assert_close(model.recompute(lean, layer), eager.attentions[layer], atol=1e-5, rtol=0)
        assert model.capture(ids).attentions is not None  # eager attention is back after a lean run


def test_head_outputs_through_w_o_are_the_attention_output(folder):
    family, path = folder
    hf = mha_viz.load_model(path, device="cpu")
    ids = _ids(hf)
    outputs = []  # what each layer's W_O layer wrote (ALBERT's module returns its post-LayerNorm stream)
    projections = {id(output_projection(m, fam)): output_projection(m, fam) for m, fam in hf.attention_modules}
    hooks = [proj.register_forward_hook(lambda _m, _i, out: outputs.append(out.detach()))
             for proj in projections.values()]
    try:
        cap = hf.capture(ids)
    finally:
        for h in hooks:
            h.remove()
    weights = hf.head_weights()
    for layer, (module, fam) in enumerate(hf.attention_modules):
        z = cap.head_outputs[layer][0]  # (H, n, d_v)
        proj = output_projection(module, fam)
        per_head = torch.einsum("hnd,hdm->nm", z, weights["W_O"][layer])  # Σ_h z_h W_O[h]
        bias = proj.bias if proj.bias is not None else 0
        torch.testing.assert_close(per_head + bias, outputs[layer][0], atol=1e-5, rtol=1e-5)


def test_the_walkthrough_reads_the_captured_probabilities(folder):
    family, path = folder
    hf = mha_viz.load_model(path, device="cpu")
    run = mha_viz.analyze(hf, TEXT, lean=False)
    for layer in range(hf.num_layers):
        w = teaching.walkthrough(hf, TEXT, layer, 3)
        np.testing.assert_allclose(w.probs, run.attentions[layer, 3, :w.n, :w.n], atol=1e-5)
        if family == "gemma2":  # soft-capped: every score within ±5
            assert np.abs(w.scaled[np.isfinite(w.scaled)]).max() <= 5.0
        i = w.n - 1  # the last query: past the window, where one applies
        nv = qk.neuron(w, i, 0)
        np.testing.assert_allclose(nv.row_probs, w.probs[i], atol=1e-5)
        assert nv.masked == (w.window is not None and i >= w.window)


def test_switching_off_a_head_of_one_layer_of_a_shared_module_changes_that_layer_only(tmp_path):
    """ALBERT runs one attention module in every layer: switching heads off in the last layer
    leaves the earlier layers' outputs as they were, and changes the last one's."""
    hf = mha_viz.load_model(_build("albert", tmp_path), device="cpu")
    assert len(hf.attention_modules) == hf.num_layers == 3 and len({id(m) for m, _ in hf.attention_modules}) == 1
    ids = _ids(hf)

    def hidden(scale=None):
        return hidden_states(hf, ids, scale)
    scale = torch.ones(hf.num_layers, hf.num_heads)
    scale[2] = 0  # every head of the last layer off
    on, off = hidden(), hidden(scale)
    for layer in (0, 1):  # hidden_states[layer + 1] is layer `layer`'s output
        torch.testing.assert_close(off[layer + 1], on[layer + 1], atol=0, rtol=0)
    assert (off[3] - on[3]).abs().max() > 1e-3


# --- the 2025–2026 architectures (tests.models.architectures_2026) ----------------------------------
STANDS_IN = ("olmo2", "smollm3", "gpt_oss", "cohere2", "llama4")  # our MHA computes them exactly
REFUSED = {"deepseek_v3": "multi-head latent attention (MLA", "deberta": "disentangled attention"}
# what a Python exception's text looks like in a message: a refusal names the feature instead
EXCEPTION_TEXT = ("Traceback", "Error", "Exception", "has no attribute", "unpack", "NoneType", "object is not")


@pytest.fixture(scope="module", params=STANDS_IN)
def recent(request, tmp_path_factory):
    return request.param, architectures_2026.build(request.param, tmp_path_factory.mktemp(request.param))


def _features_show(family: str, probs: torch.Tensor) -> None:
    """The feature under test is visible in Hugging Face's own probabilities (L, H, n, n)."""
    chunk = architectures_2026.WINDOW
    if family == "gpt_oss":  # the sinks take a share of every row
        assert probs.sum(-1).min() < 0.99
    if family == "llama4":  # layers 0-2 chunked (query 8 starts a chunk: key 7 is hidden), layer 3 global
        assert probs[:3, :, chunk, :chunk].abs().max() == 0 and probs[3, :, chunk, :chunk].abs().max() > 0
    if family == "cohere2":  # sliding layers 0-2, a global layer 3
        assert torch.tril(probs[0], -chunk).abs().max() == 0 and torch.tril(probs[3], -chunk).abs().max() > 0


def test_our_mha_stands_in_for_the_recent_architectures(recent):
    """Our MHA in place of Hugging Face's: the same probabilities and logits; the per-layer
    recompute (lean capture, the teaching view) on an eager run's inputs and on a lean run's."""
    family, path = recent
    hf = mha_viz.load_model(path, device="cpu")
    ids = _ids(hf)
    eager = hf.capture(ids, inputs=True)
    probs = torch.stack([a[0] for a in eager.attentions])  # (L, H, n, n)
    assert probs.amax(-1).mean() > 0.3, "heads are not peaked: the test could not see a wrong scale"
    _features_show(family, probs)
    ours = mha_viz.load_model(path, device="cpu", local_attention=True)
    mine = ours.capture(ids)
    for layer in range(hf.num_layers):
        torch.testing.assert_close(mine.attentions[layer], eager.attentions[layer], atol=1e-5, rtol=0)
    torch.testing.assert_close(mine.output.logits, eager.output.logits, atol=1e-5, rtol=1e-5)
    lean = hf.capture(ids, lean=True)
    for layer in range(hf.num_layers):
        torch.testing.assert_close(hf.recompute(eager, layer), eager.attentions[layer], atol=1e-5, rtol=0)
        torch.testing.assert_close(hf.recompute(lean, layer), eager.attentions[layer], atol=1e-5, rtol=0)
    lean = ours.capture(ids, lean=True)  # ours, fused (SDPA, or `attend` where sinks need it)
    for layer in range(ours.num_layers):
        torch.testing.assert_close(ours.recompute(lean, layer), eager.attentions[layer], atol=1e-5, rtol=0)


def test_sink_logits_follow_the_heads_asked_for(tmp_path):
    """A subset of GPT-OSS's heads gets its own heads' sink logits: the same rows as all heads at once."""
    hf = mha_viz.load_model(architectures_2026.build("gpt_oss", tmp_path), device="cpu")
    cap = hf.capture(_ids(hf), inputs=True)
    mha = hf.layer_adapter(1).mha
    inp = cap.layer_inputs[1]
    with torch.inference_mode():
        q, k, v = mha.project_self(inp.hidden, inp.position_embeddings)  # (1, H|G|G, n, d)
        _, every = mha.attend(q, k, v, is_causal=True)
        heads = [3, 0]
        group = hf.num_heads // hf.num_kv_heads
        kv = [h // group for h in heads]
        _, some = mha.attend(q[:, heads], k[:, kv], v[:, kv], is_causal=True, heads=heads)
        torch.testing.assert_close(some, every[:, heads], atol=0, rtol=0)
        with pytest.raises(ValueError, match="sink logit per head"):
            mha.attend(q[:, heads], k[:, kv], v[:, kv], is_causal=True)


@pytest.mark.parametrize("family", list(REFUSED))
def test_what_our_mha_cannot_compute_is_refused_by_name(family, tmp_path):
    """Our MHA in place is refused with the feature named (no Python exception's text); with
    Hugging Face's attention every head's attention is still captured."""
    path = architectures_2026.build(family, tmp_path)
    with pytest.raises(ModelLoadError) as refused:
        mha_viz.load_model(path, device="cpu", local_attention=True)
    message = str(refused.value)
    assert REFUSED[family] in message and "Hugging Face's attention" in message
    assert not [t for t in EXCEPTION_TEXT if t in message], message
    hf = mha_viz.load_model(path, device="cpu")
    ids = torch.tensor([mha_viz.tokenize(hf, TEXT).ids])
    assert len(hf.capture(ids).attentions) == hf.num_layers


def test_a_patched_layers_copies_split_from_their_sequences_equal_whole_copies(folder):
    """Patching runs the layers before the patched one once, on its sequences, and repeats each at the decoder block
    that holds the patched layer (`patching.swapped_forward(copies=)`): every family's blocks (parallel attention
    and MLP in GPT-J, NeoX and Falcon, whose in-place add needs the block's input repeated, not the attention's;
    post-norms in Gemma 2; windows) must give each copy the last logits of the whole batch of copies, for one
    sequence and for two (a task's pairs: their masks and positions repeated too), and the split must really happen
    (one forward, the first layer's attention given the sequences only), not fall back to the whole batch."""
    family, path = folder
    model = mha_viz.load_model(path, device="cpu")
    if not model.is_causal:
        pytest.skip(f"{family} is an encoder: patching refuses it")
    one = mha_viz.tokenize(model, TEXT).ids
    two = torch.tensor([one, one[::-1]])  # two sequences of one length
    H, L, n = model.num_heads, model.num_layers, len(one)
    planted = torch.randn(H, n, 256, generator=torch.Generator().manual_seed(0))

    def swap(z: torch.Tensor) -> None:
        for row in range(z.shape[0]):  # copy row of its sequence: head row % H given its planted z
            z[row, :, row % H] = planted[row % H, :, :z.shape[-1]].to(z.dtype)
    seen: list[int] = []

    def first_input(_module, args, kwargs):
        seen.append(int((args[0] if args else kwargs["hidden_states"]).shape[0]))
    hook = model.attention_modules[0][0].register_forward_pre_hook(first_input, with_kwargs=True)
    try:
        for ids in (two[:1], two):
            for layer in (0, L - 1):
                whole = patching.swapped_forward(model, ids.repeat_interleave(H, 0), layer, swap)[:, -1:].float()
                seen.clear()
                split = patching.swapped_forward(model, ids, layer, swap, copies=H, last=True).float()
                B = ids.shape[0]
                assert seen == [B if layer else B * H], (family, B, layer, seen)  # one forward, split where asked
                assert split.shape == whole.shape
                assert (whole[0] - whole[1]).abs().max() > 1e-3  # the copies differ: each its head's planted z
                torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-5 * float(whole.abs().max()))
    finally:
        hook.remove()
