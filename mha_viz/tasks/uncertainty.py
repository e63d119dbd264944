"""A mean over a task's pairs with its uncertainty: a percentile bootstrap interval of the mean (pairs resampled
with replacement) and a sign-flip permutation p-value (under the null the effect of each pair is as likely
negative as positive). Both seeded: the same seed, the same numbers. Values are (pairs, …): every other axis
(layers and heads, or a circuit's edges) is treated at once. The resamples are drawn once, as a (resamples,
pairs) matrix of counts or signs; the values' columns then go through it a block at a time, so that memory
stays at `SCRATCH_BYTES` however many edges there are."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCRATCH_BYTES = 64 * 2**20


def _blocks(columns: int, resamples: int):
    step = max(1, SCRATCH_BYTES // (8 * resamples))
    return (slice(k, min(k + step, columns)) for k in range(0, columns, step))


def bootstrap_interval(values: np.ndarray, *, resamples: int = 1000, level: float = 0.95,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(low, high): the `level` percentile bootstrap interval of values.mean(0), each of the shape values[0]."""
    values = np.asarray(values, dtype=np.float64)
    pairs = values.shape[0]
    if pairs < 1 or resamples < 1 or not 0 < level < 1:
        raise ValueError("values need at least one pair, resamples at least 1 and level within (0, 1)")
    counts = np.random.default_rng(seed).multinomial(pairs, np.full(pairs, 1 / pairs), size=resamples) / pairs
    flat = values.reshape(pairs, -1)
    low, high = np.empty(flat.shape[1]), np.empty(flat.shape[1])
    tail = (1 - level) / 2
    for block in _blocks(flat.shape[1], resamples):
        means = counts @ flat[:, block]  # (resamples, block): each resample's mean
        low[block], high[block] = np.quantile(means, [tail, 1 - tail], axis=0)
    return low.reshape(values.shape[1:]), high.reshape(values.shape[1:])


def sign_flip_p(values: np.ndarray, *, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Two-sided p-value of values.mean(0) ≠ 0: the share of `resamples` random sign flips of the pairs whose
    |mean| reaches the observed one, counting the observed set ((1 + hits) / (1 + resamples)); shape values[0]."""
    values = np.asarray(values, dtype=np.float64)
    pairs = values.shape[0]
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(resamples, pairs)) / pairs
    flat = values.reshape(pairs, -1)
    observed = np.abs(flat.mean(axis=0))
    hits = np.zeros(flat.shape[1], dtype=np.int64)
    for block in _blocks(flat.shape[1], resamples):
        hits[block] = (np.abs(signs @ flat[:, block]) >= observed[block] - 1e-12).sum(axis=0)
    return ((1 + hits) / (1 + resamples)).reshape(values.shape[1:])


@dataclass(kw_only=True)
class OverPairs:
    """What every result over a task records beside its values: the pairs of the set that ran (indices), those
    left out by reason, the set's source, and how the interval and p-value were drawn (level, resamples, seed)."""
    kept: list[int]
    left_out: dict[str, int]
    source: str
    level: float
    resamples: int
    seed: int


class CrossesZero:
    """For a result with each mean's interval as `low` and `high` (arrays of one shape)."""

    low: np.ndarray
    high: np.ndarray

    @property
    def crosses_zero(self) -> np.ndarray:
        """True where the interval holds 0: the effect is not told apart from none."""
        return (self.low <= 0) & (self.high >= 0)


@dataclass(kw_only=True)
class MeanOverPairs(OverPairs, CrossesZero):
    """Each kept pair's values (per_pair: pairs first) and, of the same shape as one pair's, their mean, its bootstrap
    interval (low, high) and the sign-flip p-value of mean ≠ 0."""
    per_pair: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray


def mean_over_pairs(values: np.ndarray, *, resamples: int, level: float, seed: int) -> dict[str, np.ndarray]:
    """`MeanOverPairs`' arrays of `values` (pairs, …), float32: per_pair, mean, low, high and p_value."""
    low, high = bootstrap_interval(values, resamples=resamples, level=level, seed=seed)
    arrays = dict(per_pair=values, mean=np.asarray(values).mean(0), low=low, high=high,
                  p_value=sign_flip_p(values, resamples=resamples, seed=seed))
    return {name: np.asarray(a, dtype=np.float32) for name, a in arrays.items()}
