"""A model's output embeddings (its LM head, the unembedding), asked for one way by everything that reads or
hooks them."""

from __future__ import annotations

from torch import nn


def output_head(hf_model) -> nn.Module | None:
    """`hf_model.get_output_embeddings()`: the module that makes its logits, or None where it has none (an
    embedding model such as MiniLM) or no such method (a module that is not a Hugging Face model)."""
    getter = getattr(hf_model, "get_output_embeddings", None)
    return None if getter is None else getter()
