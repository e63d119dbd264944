"""Gram matrices f fᵀ of many heads' features, computed only on and above the diagonal."""

from __future__ import annotations

import numpy as np
import torch

GRAM_BLOCKS = 3  # row blocks of f fᵀ: 2/3 of the products; measured at n = 512, 144 heads: 78 ms vs 100 (2 blocks: 81)


def gram_upper(f: torch.Tensor, acc: torch.Tensor | None = None, alpha: float = 1.0) -> torch.Tensor:
    """Add alpha × the blocks of f fᵀ (f: (N, M) float32, rows may be strided) on and above the
    diagonal to `acc` (N, N) float64 (a new one when None) and return it: `symmetric`
    completes the lower triangle."""
    N = f.shape[0]
    if acc is None:
        acc = torch.zeros(N, N, dtype=torch.float64, device=f.device)
    step = -(-N // GRAM_BLOCKS)
    for i0 in range(0, N, step):
        acc[i0:i0 + step, i0:].add_((f[i0:i0 + step] @ f[i0:].T).double(), alpha=alpha)
    return acc


def symmetric(upper: torch.Tensor) -> torch.Tensor:
    """The full symmetric matrix from its upper triangle (diagonal included)."""
    return torch.triu(upper) + torch.triu(upper, 1).T


def symmetric_numpy(upper: torch.Tensor) -> np.ndarray:
    """`symmetric` as float64 numpy on the CPU."""
    return symmetric(upper).cpu().numpy()
