"""Circuits across families, on random-init models saved as a user's folder: every family the split accepts
gives faithfulness 1 for the circuit of every edge and 0 for the empty one (so its writes add up and its
receivers' own inputs reproduce the model), finds whether its blocks are parallel (the MLP reads the layer's
input: GPT-J, GPT-NeoX, Cohere) as the config says, and a family whose heads write through one norm over all
of them (Gemma 2, OLMo 2) is refused with that reason."""

from __future__ import annotations

import pytest
import torch

import mha_viz
from mha_viz.circuits import edges as circuit_edges
from tests.helpers import byte_bpe_tokenizer

pytestmark = pytest.mark.model

BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=128)
FAMILIES = {
    "qwen3": (dict(BASE, head_dim=16), False),
    "mistral": (dict(BASE, sliding_window=4), False),
    "gpt_oss": (dict(BASE, num_local_experts=4, num_experts_per_tok=2, head_dim=16, sliding_window=4,
                     layer_types=["sliding_attention", "full_attention"]), False),
    "gpt_neox": (dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      max_position_embeddings=128, use_parallel_residual=True), True),
    "cohere": (dict(BASE), True),
    "gptj": (dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, rotary_dim=8), True),
}
REFUSED = {"gemma2": dict(BASE, head_dim=16), "olmo2": dict(BASE)}
CLEAN = "the cat sat on the mat and the cat"


def _folder(tmp_path_factory, family: str, config: dict):
    from transformers import AutoConfig, AutoModelForCausalLM

    tok = byte_bpe_tokenizer()
    folder = tmp_path_factory.mktemp(family)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.for_model(family, vocab_size=len(tok), **config)).save_pretrained(
        folder)
    tok.save_pretrained(folder)
    return folder, tok


def _corrupted(tok) -> str:
    for animal in ("dog", "cow", "pig", "rat", "bat", "hat"):
        text = f"the cat sat on the mat and the {animal}"
        if len(tok(text)["input_ids"]) == len(tok(CLEAN)["input_ids"]):
            return text
    raise AssertionError("no corrupted text of the clean one's length")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_edge_gives_the_clean_run_and_none_the_corrupted(tmp_path_factory, family):
    config, parallel = FAMILIES[family]
    folder, tok = _folder(tmp_path_factory, family, config)
    model = mha_viz.load_model(str(folder), device="cpu")
    corrupted = _corrupted(tok)
    graph = circuit_edges.graph(model)
    assert all(p.parallel == parallel for p in graph.layers if p.mlp is not None)
    assert all(p.mlp is not None for p in graph.layers)  # the last layer's MLP too
    edges = mha_viz.edge_attribution(model, CLEAN, corrupted, method="eap")
    assert len(edges.scores) == int(graph.allowed.sum())
    every = mha_viz.circuit(model, CLEAN, corrupted, edges.scores)
    none = mha_viz.circuit(model, CLEAN, corrupted, [])
    assert every.faithfulness == pytest.approx(1.0, abs=1e-4)
    assert none.faithfulness == pytest.approx(0.0, abs=1e-4)
    assert every.m_circuit == pytest.approx(edges.m_clean, abs=1e-4)
    same_layer = edges.scores[(edges.scores["sender"].str.startswith("L0H")) & (edges.scores["receiver"] == "L0 MLP")]
    assert same_layer.empty == parallel  # a parallel block's MLP does not read its own layer's heads


@pytest.mark.parametrize("family", list(REFUSED))
def test_heads_writing_through_one_norm_are_refused(tmp_path_factory, family):
    folder, tok = _folder(tmp_path_factory, family, REFUSED[family])
    model = mha_viz.load_model(str(folder), device="cpu")
    with pytest.raises(mha_viz.InputError, match="one norm over all of them"):
        mha_viz.edge_attribution(model, CLEAN, _corrupted(tok))
