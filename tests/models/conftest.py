"""Random-init models of the models tier, loaded once for the whole run (from the folders that
tests/conftest.py saves): GPT-2 with Hugging Face's attention and with ours, and BERT. (The checkout's wheel,
built and installed, is test_installed_package.py's.)"""

from __future__ import annotations

import pytest

import mha_viz


@pytest.fixture(scope="session")
def tiny_gpt2(gpt2_dir):
    return mha_viz.load_model(str(gpt2_dir), device="cpu")


@pytest.fixture(scope="session")
def tiny_gpt2_ours(gpt2_dir):
    return mha_viz.load_model(str(gpt2_dir), device="cpu", local_attention=True)


@pytest.fixture(scope="session")
def tiny_bert(bert_dir):
    return mha_viz.load_model(str(bert_dir), device="cpu")
