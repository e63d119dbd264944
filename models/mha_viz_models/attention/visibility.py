"""Which keys each query may see: by position, the causal mask, sliding windows (a decoder's, or
an encoder's local band) and Llama 4's chunks, which `MultiHeadAttention.attend` masks before the
softmax (and the teaching view draws); and GPT-OSS's sinks, a key column every query sees, whose
share of the softmax no token gets."""

from __future__ import annotations

import torch


def hidden_keys(n_q: int, n_k: int, device=None, *, causal: bool = True, window: int | None = None,
                chunk: int | None = None, first: int | None = None, key_start: int = 0) -> torch.Tensor | None:
    """(n_q, n_k) bool, True where key j is hidden from query i. The keys are the positions
    key_start … key_start + n_k − 1; the queries are the n_q positions from `first`, by default the
    last n_q of the keys' (a KV cache holds the first n_k − n_q); a long text's block of queries
    names its own (`visible_span`).

    causal: query at position p sees keys j <= p, and with a window p − window < j <= p only;
    not causal (an encoder's local layers), the window shows keys |p − j| <= window.
    chunk: query at position p sees keys of its own chunk only, j // chunk == p // chunk.
    None when nothing is hidden."""
    first = key_start + n_k - n_q if first is None else first
    p = torch.arange(first, first + n_q, device=device)[:, None]  # (n_q, 1): the queries' positions
    j = torch.arange(key_start, key_start + n_k, device=device)[None, :]  # (1, n_k): the keys'
    hidden = None
    if causal:
        hidden = j > p
        if window is not None:
            hidden = hidden | (j <= p - window)
    elif window is not None:
        hidden = (j - p).abs() > window
    if chunk is not None:
        apart = (j // chunk) != (p // chunk)  # (n_q, n_k)
        hidden = apart if hidden is None else hidden | apart
    return hidden


def hidden_columns(n_q: int, n_k: int, *, causal: bool = True, window: int | None = None,
                   chunk: int | None = None, first: int | None = None, key_start: int = 0) -> tuple[int, int] | None:
    """(lo, hi): `hidden_keys`' columns lo … hi − 1 hold every key hidden from any of the block's queries; None
    when none is. Read on the host from the first and the last query's rows alone, so a block on a GPU is masked
    without waiting for the device: a key hidden from a query in between is hidden from one of them (the causal
    mask hides more keys from the first query, a causal window more from the last; an encoder's window hides
    keys far after the first query or far before the last; a chunk other than the first query's is hidden from
    it, and the first query's own chunk, where the block reaches past it, from the last)."""
    first = key_start + n_k - n_q if first is None else first
    rows = [hidden_keys(1, n_k, "cpu", causal=causal, window=window, chunk=chunk, first=p, key_start=key_start)
            for p in (first, first + n_q - 1)]
    if rows[0] is None:
        return None
    columns = torch.nonzero(rows[0][0] | rows[1][0]).flatten()
    return (int(columns[0]), int(columns[-1]) + 1) if len(columns) else None


def visible_span(start: int, stop: int, n: int, *, causal: bool = True, window: int | None = None,
                 chunk: int | None = None) -> tuple[int, int]:
    """(first, end): the keys first … end − 1 hold every key that queries start … stop − 1 of an n-token
    text may see (`hidden_keys` hides the rest inside it), so a block of queries is scored against
    those keys only: the causal mask cuts the keys after the block, a window or a chunk those long
    before it."""
    first, end = 0, (stop if causal else n)
    if window is not None:
        first = max(first, start - window + (1 if causal else 0))
        end = end if causal else min(end, stop + window)
    if chunk is not None:
        first = max(first, (start // chunk) * chunk)
        end = min(end, -(-stop // chunk) * chunk)
    return first, end


def sink_column(sinks: torch.Tensor, scores: torch.Tensor, heads: list[int] | None = None) -> torch.Tensor:
    """Each head's learned sink logit (`sinks`, (H,)) as one more key column of `scores`
    (B, h, n_q, n_k): (B, h, n_q, 1), for `heads` (None: all H)."""
    sinks = sinks if heads is None else sinks[list(heads)]
    if sinks.shape[0] != scores.shape[1]:
        raise ValueError(f"this layer has a sink logit per head: name the {scores.shape[1]} heads given")
    return sinks.to(scores.dtype).reshape(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
