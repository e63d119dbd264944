"""Which configurations are refused at load, and what the message says (mha_viz_models.families.architectures)."""

from __future__ import annotations

from types import SimpleNamespace

from mha_viz_models.families.architectures import SUPPORTED, hybrid_layers, refusal


def _config(**kw):
    base = dict(model_type="llama", num_attention_heads=4, num_hidden_layers=2, hidden_size=32)
    return SimpleNamespace(**(base | kw))


def test_a_plain_attention_config_is_read():
    assert refusal(_config(), "x") is None
    assert refusal(_config(layer_types=["sliding_attention", "full_attention"]), "x") is None


def test_layers_without_attention_are_named():
    why = refusal(_config(model_type="linear", layer_types=["linear_attention", "mamba"]), "me/m")
    assert why.startswith("'me/m' is a linear model: it has layers of type linear_attention, mamba")
    assert why.endswith(SUPPORTED + ".")


def test_a_layer_kind_not_known_to_lack_probabilities_is_not_said_to():
    """A kind this version does not read (ViT-style window attention, MiniMax-M3's sparse layers) may have
    probabilities: the refusal says mha-viz does not read it, not that it has none (a reason Hugging Face's eager
    forward could contradict)."""
    why = refusal(_config(model_type="w", layer_types=["window_attention", "minimax_m3_sparse"]), "w")
    assert "minimax_m3_sparse, window_attention" in why and "does not read yet" in why
    assert "no attention probabilities" not in why
    # DeepSeek-V4's compressed layers are read: their rows over the tokens, and the memory entries beside them
    assert refusal(_config(model_type="v4", layer_types=["compressed_sparse_attention",
                                                          "heavily_compressed_attention"]), "v4") is None


def test_a_hybrid_is_read_on_its_softmax_layers():
    """Qwen3-Next lists its layers in `layer_types`, Jamba in `layers_block_type`: either is a hybrid."""
    config = _config(model_type="qwen3_next", layer_types=["linear_attention", "full_attention", "mamba", "attention"])
    assert refusal(config, "q") is None
    assert hybrid_layers(config) == ([1, 3], {"linear_attention": [0], "mamba": [2]})
    jamba = _config(model_type="jamba", layers_block_type=["mamba", "attention"])
    assert refusal(jamba, "j") is None and hybrid_layers(jamba) == ([1], {"mamba": [0]})
    assert hybrid_layers(_config(layer_types=["full_attention", "sliding_attention"])) is None  # all attention


def test_a_layer_of_attention_and_mamba_is_among_both():
    """Falcon-H1's every layer and Zamba2's hybrid layers hold softmax attention and Mamba-2: softmax layers and
    other layers at once (named by their mixers once loaded: tests/models/test_hybrid.py)."""
    falcon = _config(model_type="falcon_h1", layer_types=["hybrid"] * 3)
    assert refusal(falcon, "f") is None
    assert hybrid_layers(falcon) == ([0, 1, 2], {"hybrid": [0, 1, 2]})
    zamba = _config(model_type="zamba2", layers_block_type=["linear_attention", "hybrid", "linear_attention", "hybrid"])
    assert refusal(zamba, "z") is None
    assert hybrid_layers(zamba) == ([1, 3], {"linear_attention": [0, 2], "hybrid": [1, 3]})


def test_a_known_non_attention_type_and_an_encoder_decoder():
    assert "Gated DeltaNet" in refusal(_config(model_type="qwen3_next"), "q")
    assert refusal(_config(model_type="bart", is_encoder_decoder=True), "b") is None  # read by their own path


def test_no_heads_in_the_config():
    assert "without the layers of self-attention heads" in refusal(_config(num_attention_heads=None), "m")
