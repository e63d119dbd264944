"""Compressed memory: DeepSeek-V4's `compressed_sparse_attention` and `heavily_compressed_attention` layers spread each
query's softmax over the tokens, over entries that each compress a window of tokens, and over a learned sink per head.

Hugging Face's eager forward returns a layer's rows over the n tokens and then its C entries, (B, H, n, n + C); the
sink's share is what a row lacks. An entry w of a layer with compression rate r is made from the tokens of window w,
[w·r, (w + 1)·r), and, in a compressed sparse layer, also from the window before it (each token writes two series,
one into its own window's entry and one into the next's): [(w − 1)·r, (w + 1)·r). A query t sees entry w once the
window is closed, t ≥ (w + 1)·r − 1; a compressed sparse layer's indexer then keeps a few of those entries for each
query (`index_topk`), and the rest get no weight. The entries of one text are ⌊n / r⌋: a text shorter than r
tokens has none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

# each layer type with compressed memory: (its key in the config's compress_rates, whether an entry also reads the
# window before its own)
MEMORY_LAYER_TYPES = {"compressed_sparse_attention": True, "heavily_compressed_attention": False}
KIND_NAMES = {"compressed_sparse_attention": "compressed sparse", "heavily_compressed_attention": "heavily compressed"}


@dataclass(frozen=True)
class MemoryLayout:
    """One layer's compressed memory: its layer type, its compression rate r and whether an entry reads the window
    before its own too."""

    kind: str
    rate: int
    overlap: bool

    def count(self, n: int) -> int:
        """How many entries a text of n tokens makes (closed windows only)."""
        return n // self.rate

    def spans(self, n: int) -> np.ndarray:
        """int64 (C, 2): the first token and one past the last of each entry's window, for a text of n tokens."""
        w = np.arange(self.count(n), dtype=np.int64)
        stop = (w + 1) * self.rate
        start = np.maximum((w - 1 if self.overlap else w) * self.rate, 0)
        return np.stack([start, stop], axis=1).reshape(-1, 2)

    @property
    def name(self) -> str:
        """How the views name the layer's kind ("compressed sparse", "heavily compressed")."""
        return KIND_NAMES.get(self.kind, self.kind)


def memory_layouts(config) -> dict[int, MemoryLayout]:
    """{model layer number: its layout} for every layer of `config` with compressed memory (none for other models)."""
    kinds = getattr(config, "layer_types", None) or ()
    rates = getattr(config, "compress_rates", None) or {}
    return {i: MemoryLayout(kind, int(rates[kind]), MEMORY_LAYER_TYPES[kind])
            for i, kind in enumerate(kinds) if kind in MEMORY_LAYER_TYPES and kind in rates}


def split(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A layer's probabilities (B, H, n, n + C) as (the rows over the tokens (B, H, n, n), over the entries
    (B, H, n, C), or None where the layer returned rows over the tokens alone)."""
    n = probs.shape[-2]
    if probs.shape[-1] == n:
        return probs, None
    return probs[..., :n], probs[..., n:]


def split_layers(attentions, model) -> tuple[tuple, tuple | None]:
    """Every layer's probabilities split (`split`) where `model` (a Hugging Face model) has compressed memory layers:
    (the rows over the tokens, the rows over the entries: each None for a layer without; None where no layer has
    any). Another model's are left as they are (rows wider than its tokens are refused at load)."""
    attentions = tuple(attentions)
    if not memory_layouts(getattr(model, "config", None)) or not any(
            a is not None and a.shape[-1] > a.shape[-2] for a in attentions):
        return attentions, None
    parts = [(None, None) if a is None else split(a) for a in attentions]
    return tuple(t for t, _ in parts), tuple(m for _, m in parts)


def entry_label(span) -> str:
    """How the views name an entry: "▤ 4–11" (the tokens it compresses)."""
    start, stop = int(span[0]), int(span[1])
    return f"▤ {start}–{stop - 1}"
