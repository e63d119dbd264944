"""toy-induction: the 2-layer attention-only model trained here (models/mha_viz_models/toy/model.py, weights committed
in models/mha_viz_models/toy/toy_induction/). Its heads have known jobs, found by mha-viz's own detectors; it loads
and captures like every other model. Its files and tokenizer: tests/unit/test_toy_files.py;
every view of the app: tests/app/test_token_cap.py (its local sweep)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

import mha_viz
import mha_viz_models
from mha_viz import metrics
from mha_viz_models import ModelLoadError, MultiHeadAttention
from mha_viz_models.loading.toy_loader import load_toy
from mha_viz_models.toy.model import FOLDER, LETTERS, ToyConfig, ToyInductionModel

TEXT = "q w e r t y u q w e r t y u"


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def _repeated(seed: int, k: int) -> str:
    """k distinct random letters, space-separated, written twice."""
    letters = random.Random(seed).sample(LETTERS, k)
    return " ".join(letters + letters)


# fresh sequences: other seeds than training's, lengths where a perfect previous-token head
# clears 0.8 with room ((2k)/(2k+1) >= 0.92: the first letter's "previous token" is [BOS])
FRESH = [(seed, k) for seed, k in zip(range(101, 109), (6, 7, 8, 9, 10, 11, 12, 13))]


@pytest.mark.parametrize("seed,k", FRESH)
def test_layer0_has_a_previous_token_head_and_layer1_an_induction_head(toy, seed, k):
    run = mha_viz.analyze(toy, _repeated(seed, k))
    assert run.n == 2 * k + 1 and run.tokens[0] == "<bos>"
    table = metrics.head_table(run, toy.head_weights())
    layer0, layer1 = table[table.layer == 0], table[table.layer == 1]
    assert layer0.prev_token_score.max() > 0.8
    # a perfect induction head scores k / (2k + 1) < 0.5 here: only the repeat has targets
    assert layer1.induction_score.max() > 0.35
    # the jobs are the layers' own: layer 1 does not look at the previous token, nor layer 0 ahead
    assert layer1.prev_token_score.max() < 0.5 and layer0.induction_score.max() < 0.2
    assert "diagonal:prev" in set(layer0.pattern)


def test_the_heads_come_from_training_not_from_the_architecture(toy):
    """The same architecture at random initialisation has neither head."""
    twin = mha_viz_models.random_twin(toy, seed=0)
    run = mha_viz.analyze(twin, _repeated(7, 10))
    table = metrics.head_table(run, twin.head_weights())
    assert table[table.layer == 0].prev_token_score.max() < 0.5
    assert table[table.layer == 1].induction_score.max() < 0.2
    assert not any(torch.equal(a, b) for a, b in zip(twin.hf_model.parameters(), toy.hf_model.parameters()))


def test_it_predicts_the_repeat(toy):
    """What the heads are for: every letter of the repeat after the first is predicted."""
    k = 9
    ids = toy.tokenizer(_repeated(5, k), return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logits = toy.hf_model(ids).logits[0]  # (n, vocab)
    assert torch.equal(logits[k + 1:-1].argmax(-1), ids[0, k + 2:])


def test_in_the_registry_and_loaded_on_cpu(toy):
    assert "toy-induction" in mha_viz_models.BUNDLED
    assert "induction" in mha_viz_models.BUNDLED["toy-induction"].title
    assert (toy.name, toy.model_type, toy.num_layers, toy.num_heads, toy.num_kv_heads) == \
        ("toy-induction", "toy-induction", 2, 4, 4)
    assert toy.is_causal and toy.local_attention and toy.has_head_outputs
    assert toy.implementation.startswith("ours") and toy.device == torch.device("cpu")
    assert toy.d_model == toy.num_heads * toy.d_k
    assert toy.num_params == sum(p.numel() for p in toy.hf_model.parameters())
    # our MHA in every layer, and no MLP: the only linear layers are W_Q, W_K, W_V, W_O and the unembedding
    assert len(toy.adapters) == 2 and all(isinstance(a.mha, MultiHeadAttention) for a in toy.adapters)
    linears = [m for m in toy.hf_model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 4 * toy.num_layers + 1


def test_our_attention_toggle_gives_the_same_model():
    """The sidebar's "Compute with our MHA" does not matter: the toy's attention is always ours."""
    plain = mha_viz.load_model("toy-induction", device="cpu", local_attention=False)
    assert plain.local_attention and plain.adapters


def test_tokens_are_shown_as_letters_one_word_each(toy):
    run = mha_viz.analyze(toy, "a b ? a b")
    assert run.tokens == ["<bos>", "a", "b", "<unk>", "a", "b"]
    assert run.special_mask == [True, False, False, False, False, False]  # unknown is text
    assert run.word_ids == list(range(6))


def test_long_text_is_cut_to_the_positions_it_knows(toy):
    text = " ".join(LETTERS * 3)  # 78 letters
    run = mha_viz.analyze(toy, text)
    assert run.n == toy.max_positions == 64 and run.truncated and run.num_input_tokens == 79


def test_lean_capture_equals_eager(toy):
    enc = toy.tokenizer([TEXT, "a b c d a b"], return_tensors="pt", padding=True)
    assert (enc["attention_mask"] == 0).any()  # the second row is padded on the right
    ids, mask = enc["input_ids"], enc["attention_mask"]
    eager = toy.capture(ids, mask)
    lean = toy.capture(ids, mask, lean=True)
    assert lean.attentions is None and len(lean.layer_inputs) == toy.num_layers
    for layer in range(toy.num_layers):
        torch.testing.assert_close(toy.recompute(lean, layer), eager.attentions[layer], atol=1e-5, rtol=0)
        for head, probs in toy.each_head(lean, layer):
            torch.testing.assert_close(probs, eager.attentions[layer][:, head], atol=1e-5, rtol=0)
    torch.testing.assert_close(lean.hidden, eager.hidden, atol=1e-5, rtol=1e-5)
    for z_lean, z_eager in zip(lean.head_outputs, eager.head_outputs):
        torch.testing.assert_close(z_lean, z_eager, atol=1e-5, rtol=1e-5)
    assert all(a.need_weights for a in toy.adapters)  # lean capture put eager attention back
    run_lean = mha_viz.analyze(toy, TEXT, lean=True)
    run_eager = mha_viz.analyze(toy, TEXT, lean=False)
    assert abs(run_lean.attentions - run_eager.attentions).max() < 1e-5


def test_probabilities_are_causal_rows_summing_to_one(toy):
    _, attentions, out = toy.forward(toy.tokenizer(TEXT, return_tensors="pt")["input_ids"])
    for probs in attentions:
        assert torch.allclose(probs.sum(-1), torch.ones(()), atol=1e-5)
        assert probs.triu(1).abs().max() == 0
    assert out.logits.shape == (1, 15, 29) and len(out.hidden_states) == 3


def test_gradients_flow_through_our_attention_alike_eager_and_fused():
    """Training uses our MHA's fused path; the eager path (probabilities kept) trains the same."""
    torch.manual_seed(0)
    model = ToyInductionModel(ToyConfig(hidden_size=32, num_attention_heads=4, max_position_embeddings=16))
    ids = torch.randint(3, 29, (2, 12))
    grads = []
    for fused in (False, True):
        for layer in model.layers:
            layer.attn.need_weights = not fused
        model.zero_grad()
        logits = model(ids).logits[:, :-1]
        torch.nn.functional.cross_entropy(logits.reshape(-1, 29), ids[:, 1:].reshape(-1)).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name, g in grads[0].items():
        assert g.abs().sum() > 0, name
        torch.testing.assert_close(g, grads[1][name], atol=1e-5, rtol=1e-4)


def test_missing_or_damaged_weights_say_how_to_recreate_them(tmp_path: Path):
    with pytest.raises(ModelLoadError, match=r"mha_viz_models\.toy\.train"):
        load_toy("cpu", folder=tmp_path)
    (tmp_path / "config.json").write_text((FOLDER / "config.json").read_text())
    (tmp_path / "model.safetensors").write_bytes((FOLDER / "model.safetensors").read_bytes()[:1000])
    with pytest.raises(ModelLoadError, match="damaged"):
        load_toy("cpu", folder=tmp_path)
