"""Which keys each query may see: by position, the causal mask, sliding windows (a decoder's, or
an encoder's local band) and Llama 4's chunks, which `MultiHeadAttention.attend` masks before the
softmax (and the teaching view draws); and GPT-OSS's sinks, a key column every query sees, whose
share of the softmax no token gets."""

from __future__ import annotations

import torch


def hidden_keys(n_q: int, n_k: int, device=None, *, causal: bool = True, window: int | None = None,
                chunk: int | None = None) -> torch.Tensor | None:
    """(n_q, n_k) bool, True where key j is hidden from query i; the queries are the last n_q of
    the n_k positions (a KV cache holds the first n_k − n_q).

    causal: query at position p sees keys j <= p, and with a window p − window < j <= p only;
    not causal (an encoder's local layers), the window shows keys |p − j| <= window.
    chunk: query at position p sees keys of its own chunk only, j // chunk == p // chunk.
    None when nothing is hidden."""
    offset = n_k - n_q
    ones = torch.ones(n_q, n_k, dtype=torch.bool, device=device)
    hidden = None
    if causal:
        hidden = ones.triu(offset + 1)
        if window is not None:
            hidden |= ones.tril(offset - window)
    elif window is not None:
        hidden = ones.triu(offset + window + 1) | ones.tril(offset - window - 1)
    if chunk is not None:
        chunks = torch.arange(n_k, device=device) // chunk  # (n_k,): each position's chunk
        apart = chunks[offset:, None] != chunks[None, :]  # (n_q, n_k)
        hidden = apart if hidden is None else hidden | apart
    return hidden


def sink_column(sinks: torch.Tensor, scores: torch.Tensor, heads: list[int] | None = None) -> torch.Tensor:
    """Each head's learned sink logit (`sinks`, (H,)) as one more key column of `scores`
    (B, h, n_q, n_k): (B, h, n_q, 1), for `heads` (None: all H)."""
    sinks = sinks if heads is None else sinks[list(heads)]
    if sinks.shape[0] != scores.shape[1]:
        raise ValueError(f"this layer has a sink logit per head: name the {scores.shape[1]} heads given")
    return sinks.to(scores.dtype).reshape(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
