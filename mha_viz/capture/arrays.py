"""Read-only numpy arrays seen as tensors: the app's cached runs are shared read-only, and the
torch code that reads them must neither copy them nor warn about it."""

from __future__ import annotations

import warnings

import numpy as np
import torch


def tensor_view(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing the array's memory, without PyTorch's warning for read-only arrays (the
    app's cached runs are read-only; callers only read through the view)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "the given NumPy array is not writable"
        return torch.from_numpy(array)
