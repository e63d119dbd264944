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


def assert_same_ranking(order: np.ndarray, other: np.ndarray, scores: np.ndarray, tolerance: float,
                        where: str = "") -> None:
    """`order` and `other` are the best k items best first (indices into the flat `scores`, the same count)
    in two computations: the same top k (`assert_same_top`), and the items both keep in the same order
    (`assert_same_order`), each up to the items whose reference scores lie within `tolerance`."""
    a, b = [int(i) for i in np.ravel(order)], [int(i) for i in np.ravel(other)]
    assert_same_top(np.asarray(a), np.asarray(b), scores, tolerance, where)
    both = set(a) & set(b)
    assert_same_order(np.asarray([i for i in a if i in both]), np.asarray([i for i in b if i in both]), scores,
                      tolerance, where)


def assert_same_tokens(tokens, other, scores_after, tolerance: float, where: str = "") -> int:
    """`tokens` and `other` are what two computations picked one after another from the same prompt, each
    the argmax of its scores (greedy decoding); `scores_after(prefix)` is the reference's scores for the
    token after `prefix` (the tokens picked so far). They agree up to the first step where they differ;
    there both picks are within `tolerance` of the reference's best (`assert_same_argmax`), and what
    follows continues two different texts: it is not compared (one may stop before the other, at its end
    token). Returns that step (the length when none)."""
    a, b = [int(t) for t in tokens], [int(t) for t in other]
    for step, (x, y) in enumerate(zip(a, b)):
        if x != y:
            scores = np.asarray(scores_after(a[:step]), np.float64)
            for pick in (x, y):
                assert_same_argmax(pick, scores, tolerance, f"{where} step {step}")
            return step
    assert len(a) == len(b), (f"{where}: the same tokens, then one stops", a, b)
    return len(a)


def assert_same_counts(counts: np.ndarray, scores: np.ndarray, edges: np.ndarray, tolerance: float,
                       where: str = "") -> None:
    """`counts` (one a bin) is another computation's histogram of the reference `scores` over the bins
    between `edges` (increasing inner edges: bin b holds edges[b - 1] <= s < edges[b], the first and the
    last open): it counts what the reference counts, up to the scores within `tolerance` of an edge, which
    may fall on either side. Each such score can only move across its edge, so every count of the first
    bins lies between the scores surely in them and those that may be."""
    c = np.cumsum(np.asarray(counts, np.int64))
    s, e = np.asarray(scores, np.float64).ravel(), np.asarray(edges, np.float64)
    assert c.size == e.size + 1 and c[-1] == s.size, (where, c[-1], s.size, c.size, e.size)
    surely = np.array([(s < x - tolerance).sum() for x in e])  # below edge x whatever the rounding
    maybe = np.array([(s < x + tolerance).sum() for x in e])
    bad = (c[:-1] < surely) | (c[:-1] > maybe)
    assert not bad.any(), (f"{where}: below the edges {e[bad].tolist()} the counts are {c[:-1][bad].tolist()}; "
                           f"the reference puts {surely[bad].tolist()} there, up to {maybe[bad].tolist()} with the "
                           f"scores within {tolerance:.3g} of them")


class _Band:
    """A value known up to ± its tolerance, for `settled`: a comparison the whole band answers alike is
    answered; any other is asked of `choose` (each way in turn, see `settled`). NaN compares false, as a
    float does."""

    __slots__ = ("lo", "hi", "choose")

    def __init__(self, lo: float, hi: float, choose) -> None:
        self.lo, self.hi, self.choose = lo, hi, choose

    def _bounds(self, other) -> tuple[float, float]:
        return (other.lo, other.hi) if isinstance(other, _Band) else (float(other), float(other))

    def _compare(self, other, strict: bool, greater: bool) -> bool:
        lo, hi = self._bounds(other)
        if np.isnan([self.lo, self.hi, lo, hi]).any():
            return False
        if not greater:  # a < b is b > a
            return _Band(lo, hi, self.choose)._compare(self, strict, True)
        if (self.lo > hi) if strict else (self.lo >= hi):
            return True
        if (self.hi <= lo) if strict else (self.hi < lo):
            return False
        return self.choose()

    def __gt__(self, other):
        return self._compare(other, True, True)

    def __ge__(self, other):
        return self._compare(other, False, True)

    def __lt__(self, other):
        return self._compare(other, True, False)

    def __le__(self, other):
        return self._compare(other, False, False)

    def __add__(self, other):
        lo, hi = self._bounds(other)
        return _Band(self.lo + lo, self.hi + hi, self.choose)

    __radd__ = __add__

    def __neg__(self):
        return _Band(-self.hi, -self.lo, self.choose)

    def __sub__(self, other):
        return self + (-other if isinstance(other, _Band) else -float(other))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.isfinite and method == "__call__":
            return bool(np.isfinite(self.lo) and np.isfinite(self.hi))
        return NotImplemented

    def __bool__(self):
        raise TypeError("a value known up to its tolerance has no truth value")


def settled(classify, inputs, tolerance, paths: int = 4096):
    """What `classify` (a function of a mapping of named numbers, comparing them with each other and with
    thresholds, adding and negating them) answers for every point within `tolerance` of `inputs` (a mapping;
    `tolerance` a number, or a mapping of the same names), or None when points of that box get different
    answers: each comparison the whole box does not answer alike is taken both ways, and every answer
    reached must be the same (None too past `paths` ways through `classify`)."""
    names = list(inputs)
    tol = {n: float(tolerance[n] if isinstance(tolerance, dict) else tolerance) for n in names}
    script: list[bool] = []  # the answers given to undecided comparisons, in the order they were asked
    seen = set()
    for _ in range(paths):
        asked = [0]

        def choose():
            if asked[0] == len(script):
                script.append(False)
            asked[0] += 1
            return script[asked[0] - 1]
        box = {n: _Band(float(inputs[n]) - tol[n], float(inputs[n]) + tol[n], choose) for n in names}
        seen.add(classify(box))
        if len(seen) > 1:
            return None
        del script[asked[0]:]
        while script and script[-1]:  # the next way through: the last False answered True, what follows anew
            script.pop()
        if not script:
            return seen.pop()
        script[-1] = True
    return None


def assert_same_class(labels, other, inputs, classify, tolerance, where: str = "") -> None:
    """`labels` and `other` (one an item) are `classify` of two computations' inputs; `inputs` maps each of
    `classify`'s names to the reference's values (an array over the items), `tolerance` likewise (or one
    number): the two agree, and agree with `classify`, on every item whose answer is `settled` within
    the tolerance; an item with a value within the tolerance of a rule's threshold may go either way."""
    a, b = list(labels), list(other)
    assert len(a) == len(b), (where, len(a), len(b))
    columns = {n: np.ravel(np.asarray(v, np.float64)) for n, v in inputs.items()}
    tols = {n: _flat(tolerance[n] if isinstance(tolerance, dict) else tolerance, columns[n].size) for n in columns}
    loose = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y and x == classify({n: columns[n][i] for n in columns}):
            continue  # alike, and as classify says: nothing to settle (`settled` is the slow part)
        sure = settled(classify, {n: columns[n][i] for n in columns}, {n: tols[n][i] for n in columns})
        if sure is not None and not x == y == sure:
            loose.append((i, x, y, sure))
    assert not loose, f"{where}: classes (item, one, other, within the tolerance) differ: {loose}"


def assert_same_vote(winners, voters, classify, tolerance, order, key=str, where: str = "") -> None:
    """`winners` (one an item) is each item's most frequent class `key(classify(...))` over the voters,
    ties to the first in `order`, in another computation; `voters` is the reference's inputs, a list with a
    mapping like `assert_same_class`'s for each voter (a document), `tolerance` likewise. A voter whose
    class is not `settled` within the tolerance may vote for any class: each winner must be one that the
    settled votes and those could make."""
    rank = {c: j for j, c in enumerate(order)}

    def inputs(voter, i):
        return {n: np.ravel(voter[n])[i] for n in voter}

    def beaten(w, cast) -> dict:
        """The classes that beat `w` whatever the votes None go to (each to w, at best)."""
        count = {c: cast.count(c) for c in set(cast) - {None}}
        mine = count.get(w, 0) + cast.count(None)
        return {c: n for c, n in count.items() if c != w and (n > mine or (
            n == mine and rank.get(c, len(rank)) < rank.get(w, len(rank))))}
    loose = []
    for i, w in enumerate(winners):
        if not beaten(w, [key(classify(inputs(v, i))) for v in voters]):
            continue  # the reference's own votes make it (`settled` is the slow part)
        cast = []
        for v in voters:
            sure = settled(classify, inputs(v, i), {n: _at(tolerance, n, v, i) for n in v})
            cast.append(None if sure is None else key(sure))
        if beaten(w, cast):
            loose.append((i, w, {c: cast.count(c) for c in set(cast) - {None}}, cast.count(None)))
    assert not loose, f"{where}: winners no settled vote allows (item, winner, settled votes, unsettled): {loose}"


def _at(tolerance, name, values, i) -> float:
    return float(_flat(tolerance[name] if isinstance(tolerance, dict) else tolerance, np.size(values[name]))[i])


def _flat(tolerance, size: int) -> np.ndarray:
    """One tolerance an item: a number for all, or an array of any shape with one an item."""
    t = np.asarray(tolerance, np.float64)
    return np.full(size, float(t)) if t.ndim == 0 else t.ravel()
