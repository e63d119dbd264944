"""What two computations of the same scores (float32 and half precision, CPU and GPU, Numba and
torch) must agree on when something is chosen from the scores: a set above a threshold, a top k, a
ranking, an argmax. Rounding moves a score by up to the precision's tolerance, so an item whose
reference score lies within that tolerance of the boundary may land on either side; every other
item must be chosen alike. Each function takes the reference's scores (float32, CPU, torch) and
asserts that, with a message naming the items that differ beyond the band."""

from __future__ import annotations

import numpy as np


def _where(mask: np.ndarray) -> list:
    return [tuple(int(i) for i in ix) if len(ix) > 1 else int(ix[0]) for ix in zip(*np.nonzero(mask))]


def assert_same_above(chosen: np.ndarray, other: np.ndarray, scores: np.ndarray, threshold: float,
                      tolerance: float, where: str = "") -> None:
    """`chosen` and `other` (bool, the shape of `scores`) are `scores > threshold` in two computations:
    they agree on every item whose reference score is more than `tolerance` from `threshold`."""
    a, b, s = np.asarray(chosen, bool), np.asarray(other, bool), np.asarray(scores, np.float64)
    assert a.shape == b.shape == s.shape, (where, a.shape, b.shape, s.shape)
    outside = np.abs(s - threshold) > tolerance
    differ = (a != b) & outside
    assert not differ.any(), (f"{where}: chosen differently at {_where(differ)}, scores {s[differ].tolist()}, "
                              f"more than {tolerance:.3g} from the threshold {threshold}")


def assert_same_top(top: np.ndarray, other: np.ndarray, scores: np.ndarray, tolerance: float,
                    where: str = "") -> None:
    """`top` and `other` (indices into the flat `scores`, the same count k) are the k largest scores in
    two computations: they agree except on items within `tolerance` of the k-th largest reference score."""
    s = np.asarray(scores, np.float64).ravel()
    a, b = {int(i) for i in np.ravel(top)}, {int(i) for i in np.ravel(other)}
    assert len(a) == len(b), (where, sorted(a), sorted(b))
    kth = np.sort(s)[::-1][len(a) - 1] if a else np.inf
    loose = sorted(i for i in a ^ b if abs(s[i] - kth) > tolerance)
    assert not loose, (f"{where}: {loose} in one top {len(a)} only, scores {s[loose].tolist()}, more than "
                       f"{tolerance:.3g} from the {len(a)}th largest {kth:.4g}")


def assert_same_order(order: np.ndarray, other: np.ndarray, scores: np.ndarray, tolerance: float,
                      where: str = "") -> None:
    """`order` and `other` rank the same items (indices into the flat `scores`, best first) in two
    computations: two items may stand in either order only when their reference scores lie within
    `tolerance` of each other."""
    s = np.asarray(scores, np.float64).ravel()
    a, b = [int(i) for i in np.ravel(order)], [int(i) for i in np.ravel(other)]
    assert sorted(a) == sorted(b), (where, a, b)
    rank = {item: k for k, item in enumerate(b)}
    for i, x in enumerate(a):  # every pair the two orders put the other way round
        for y in a[i + 1:]:
            if rank[y] < rank[x]:
                assert abs(s[x] - s[y]) <= tolerance, (f"{where}: {x} and {y} swapped, scores {s[x]:.4g} and "
                                                       f"{s[y]:.4g}, more than {tolerance:.3g} apart")


def assert_same_argmax(picked, scores: np.ndarray, tolerance: float, where: str = "") -> None:
    """`picked` (an index into `scores`, flat or a tuple) is the argmax of another computation: its
    reference score is within `tolerance` of the reference's largest."""
    s = np.asarray(scores, np.float64)
    at = np.ravel_multi_index(picked, s.shape) if isinstance(picked, tuple) else int(picked)
    best = float(s.max())
    assert best - s.ravel()[at] <= tolerance, (f"{where}: picked {picked} scores {s.ravel()[at]:.4g}, more than "
                                               f"{tolerance:.3g} under the largest {best:.4g}")
