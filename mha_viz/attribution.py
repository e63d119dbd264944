"""What heads do, not only where they look (`../shared/docs/attribution.md`): value-weighted
attention (Kobayashi et al. 2020). The contribution of key j to query i through head h is
‖A[h, i, j] f_h(x_j)‖ = A[h, i, j] · ‖f_h(x_j)‖, with f_h(x) = (x W_V + b_V) W_O[h]: the run's
`value_norms` turn every pattern into contributions at the cost of one product."""

from __future__ import annotations

import numpy as np

from .capture import AttentionRun
from .tokenize import InputError

LABEL = "value-weighted (‖α f(x)‖{})"


def value_weighted(run: AttentionRun, normalise: bool = False) -> np.ndarray:
    """(layers, heads, n, n) contributions `A * value_norms[:, :, None, :]`; with `normalise`,
    each row divided by its sum (a row with nothing to divide stays 0). Raises InputError when
    the run has no value norms (a model whose value path mha-viz cannot read)."""
    if run.value_norms is None:
        raise InputError(f"The value path of {run.model_name} cannot be read, so its attention cannot be weighted "
                         "by what each token writes: the weights are shown.")
    c = run.attentions * run.value_norms[:, :, None, :].astype(np.float32)
    if normalise:
        sums = c.sum(-1, keepdims=True)
        c = np.divide(c, sums, out=np.zeros_like(c), where=sums > 0)
    return c


def label(normalise: bool) -> str:
    """How a view titles the contributions: "value-weighted (‖α f(x)‖, row-normalised)"."""
    return LABEL.format(", row-normalised" if normalise else "")
