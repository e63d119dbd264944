"""Level of detail for one head's n × n attention: a downsampled whole-matrix view that keeps a
single strong cell visible (block max, with the block mean beside it), a token window at full
resolution, and a word-level view (word pieces merged as Clark et al. 2019 do: sum over the
keys of a word, mean over its queries). Plain numpy; the figures are in `figures`.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from mha_viz.capture.arrays import tensor_view
from mha_viz.text.readable import bare

FULL_DETAIL_TOKENS = 256  # above this, the head view opens on the downsampled view
MAX_FULL_TOKENS = 512  # above this, every-token detail is offered only through a window


def max_pool(a: np.ndarray, size: int) -> np.ndarray:
    """Max-pool (..., n, n) down to at most (..., size, size), so a single strong cell stays
    visible. PyTorch's adaptive max-pool (neighbouring bins may share an edge cell) runs
    threaded: about 1 s for 270 heads at n = 2,048, where numpy's reduceat took 10 s."""
    n = a.shape[-1]
    if n <= size:
        return a
    x = tensor_view(np.ascontiguousarray(a)).reshape(-1, 1, n, n)
    pooled = torch.nn.functional.adaptive_max_pool2d(x, size)  # (heads, 1, size, size)
    return pooled.reshape(*a.shape[:-2], size, size).numpy()


def block_edges(n: int, size: int) -> np.ndarray:
    """Edges of at most `size` contiguous blocks covering 0..n (every block non-empty)."""
    return np.unique(np.linspace(0, n, min(n, size) + 1).round().astype(int))


def pooled(matrix: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Block max and block mean of an (n, n) matrix on a grid of at most size × size blocks.

    Returns (max, mean, edges): block (a, b) covers queries edges[a]:edges[a+1] and keys
    edges[b]:edges[b+1]. The max keeps a single strong cell visible at any n.
    """
    a = np.asarray(matrix)
    edges = block_edges(a.shape[-1], size)
    widths = np.diff(edges)
    if a.ndim != 2:
        starts = edges[:-1]
        top = np.maximum.reduceat(np.maximum.reduceat(a, starts, axis=-2), starts, axis=-1)
        total = np.add.reduceat(np.add.reduceat(a, starts, axis=-2, dtype=np.float64), starts, axis=-1)
    else:  # one matrix: PyTorch's index reductions, threaded (a words level of 6,000 words: 0.1 s, not 1 s)
        x = tensor_view(np.ascontiguousarray(a, dtype=np.float32))
        block = torch.from_numpy(np.repeat(np.arange(len(widths)), widths))  # each row's (and column's) block
        B = len(widths)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "index_reduce() is in beta"
            rows_top = torch.full((B, x.shape[1]), float("-inf")).index_reduce_(0, block, x, "amax")
            top = torch.full((B, B), float("-inf")).index_reduce_(1, block, rows_top, "amax").numpy()
        rows_sum = torch.zeros((B, x.shape[1])).index_add_(0, block, x).double()  # a block's rows: a few, float32
        total = torch.zeros((B, B), dtype=torch.float64).index_add_(1, block, rows_sum).numpy()
    mean = total / (widths[:, None] * widths[None, :])
    return top.astype(np.float32), mean.astype(np.float32), edges


def word_groups(word_ids: list[int]) -> list[np.ndarray]:
    """Token positions of each word, in order (word ids may repeat only contiguously)."""
    ids = np.asarray(word_ids)
    if ids.size == 0:
        return []
    cuts = np.flatnonzero(np.diff(ids) != 0) + 1
    return np.split(np.arange(ids.size), cuts)


def word_level(matrix: np.ndarray, word_ids: list[int]) -> np.ndarray:
    """(W, W) word-to-word attention: for a query word, the mean over its pieces of the summed
    weight on each key word's pieces. Rows still sum to 1 when the token rows do."""
    a = np.asarray(matrix, dtype=np.float64)
    groups = word_groups(word_ids)
    starts = np.array([g[0] for g in groups])
    sizes = np.array([len(g) for g in groups])
    keys_summed = np.add.reduceat(a, starts, axis=1)  # (n, W)
    return (np.add.reduceat(keys_summed, starts, axis=0) / sizes[:, None]).astype(np.float32)


def word_labels(tokens: list[str], word_ids: list[int], *, joiner: str = "") -> list[str]:
    """One label per word: its pieces joined (display tokens already have their markers removed)."""
    return [joiner.join(tokens[i] for i in g) for g in word_groups(word_ids)]


def range_label(tokens: list[str], start: int, stop: int, width: int = 24) -> str:
    """'12–15: the cat sat' for the tokens start..stop-1, shortened to about `width` characters."""
    text = " ".join(bare(t) for t in tokens[start:stop])
    if len(text) > width:
        text = text[:width - 1] + "…"
    span = f"{start}" if stop - start == 1 else f"{start}–{stop - 1}"
    return f"{span}: {text}"


SENTENCE_END = (".", "!", "?", "。", "！", "？")


def subset(matrix: np.ndarray, rows, cols) -> np.ndarray:
    """The queries `rows` (in the given order) over the keys `cols` of an (n, n) matrix."""
    a = np.asarray(matrix)
    rows, cols = np.asarray(rows, dtype=int), np.asarray(cols, dtype=int)
    n = a.shape[-1]
    if rows.size == 0 or cols.size == 0:
        raise ValueError("pick at least one query and one key")
    if rows.min() < 0 or cols.min() < 0 or rows.max() >= n or cols.max() >= n:
        raise IndexError(f"token positions must lie in 0..{n - 1}")
    return a[..., rows[:, None], cols[None, :]]


def sentence_spans(tokens: list[str]) -> list[tuple[int, int]]:
    """(start, stop) of each sentence: a sentence ends after a token ending in . ! or ? (a token
    after the last one, such as [SEP], joins the last sentence)."""
    spans, start = [], 0
    for i, tok in enumerate(tokens):
        if tok.strip().endswith(SENTENCE_END) and i + 1 < len(tokens):
            spans.append((start, i + 1))
            start = i + 1
    if start < len(tokens):
        spans.append((start, len(tokens)))
    if len(spans) > 1 and all(tokens[i].strip() in ("", "[SEP]", "</s>", "<|endoftext|>")
                              for i in range(*spans[-1])):
        spans[-2:] = [(spans[-2][0], spans[-1][1])]  # a trailing special token is not a sentence
    return spans
