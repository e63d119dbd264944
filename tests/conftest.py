"""Shared fixtures: seeded randomness, the bundled models (loaded once per session) and
random-init GPT-2 / BERT / Llama folders saved to a temporary directory."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


def _bundled(name: str, local_attention: bool, fixture_name: str):
    """A session fixture loading a bundled model once, with HF's attention or ours."""
    @pytest.fixture(scope="session", name=fixture_name)
    def _fixture():
        import mha_viz
        return mha_viz.load_model(name, device="cpu", local_attention=local_attention)
    return _fixture


minilm = _bundled("minilm", False, "minilm")
minilm_ours = _bundled("minilm", True, "minilm_ours")
smollm2 = _bundled("smollm2", False, "smollm2")
smollm2_ours = _bundled("smollm2", True, "smollm2_ours")


CORPUS = [
    "The cat sat on the mat. The dog sat on the log.",
    "A quick brown fox jumps over the lazy dog!",
    "Attention heads look at tokens; some look back, some look at the start.",
    "Hello world, hello attention, hello heads 123 456.",
]


def _byte_bpe_tokenizer():
    """A small GPT-2-style byte-level BPE tokenizer trained here (no hub access needed)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 20, vocab_size=400, min_frequency=1,
                            special_tokens=["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>")


def _save_random(tmp_path_factory, name, model_cls, config, tok, seed):
    """Save a random-init model and its tokenizer as a Hugging Face folder."""
    folder = tmp_path_factory.mktemp(name)
    torch.manual_seed(seed)
    model_cls(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def gpt2_dir(tmp_path_factory):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = _byte_bpe_tokenizer()
    config = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=64, n_layer=3, n_head=4)
    return _save_random(tmp_path_factory, "gpt2-random", GPT2LMHeadModel, config, tok, 1)


@pytest.fixture(scope="session")
def bert_dir(tmp_path_factory):
    """Random-init BertForMaskedLM with MiniLM's WordPiece vocabulary."""
    import mha_viz  # noqa: F401 - makes sure the bundled package is importable
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from models.loading import BUNDLED

    tok = AutoTokenizer.from_pretrained(BUNDLED["minilm"].locate())
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128, max_position_embeddings=64)
    return _save_random(tmp_path_factory, "bert-random", BertForMaskedLM, config, tok, 2)


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory):
    """Random-init Llama with grouped-query attention (8 query heads, 2 KV heads)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = _byte_bpe_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=128)
    return _save_random(tmp_path_factory, "llama-random", LlamaForCausalLM, config, tok, 3)
