"""Layouts of a dissimilarity matrix for the views: a clustered order and a 2-D map (MDS)."""

from __future__ import annotations

import numpy as np


def cluster_order(dissimilarity: np.ndarray) -> np.ndarray:
    """A permutation that puts similar heads next to each other: average-linkage clustering,
    leaves in optimal order."""
    # scipy is heavy and needed only here: imported when first used, not with the package
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    d = np.asarray(dissimilarity, dtype=np.float64)
    if d.shape[0] < 3:
        return np.arange(d.shape[0])
    condensed = squareform(d, checks=False)
    tree = linkage(condensed, method="average")
    return leaves_list(optimal_leaf_ordering(tree, condensed))


# SMACOF stops when an iteration lowers the stress by less than this fraction. Measured on the JS
# of 144 random-init BERT-base heads at n = 512: 89 iterations, 13 ms, stress 0.1 % above that
# of 300 iterations at 1e-9 (39 ms), the same map to the eye (scikit-learn's default is 1e-3).
STRESS_TOLERANCE = 1e-5


def mds(dissimilarity: np.ndarray, *, dim: int = 2, iterations: int = 300, seed: int = 0) -> np.ndarray:
    """Metric MDS (SMACOF, started from classical MDS): (N, dim) points whose distances match
    the dissimilarities as well as possible (Clark et al. 2019 map heads this way from JS)."""
    d = np.asarray(dissimilarity, dtype=np.float64)
    N = d.shape[0]
    if N <= dim:
        return np.eye(N, dim)
    # classical MDS: top eigenvectors of the double-centred squared dissimilarities
    J = np.eye(N) - 1.0 / N
    B = -0.5 * J @ (d ** 2) @ J
    vals, vecs = np.linalg.eigh(B)
    order = np.argsort(vals)[::-1][:dim]
    X = vecs[:, order] * np.sqrt(np.clip(vals[order], 1e-12, None))
    X += np.random.default_rng(seed).normal(scale=1e-6, size=X.shape)  # break ties of equal points
    prev = np.inf
    for _ in range(iterations):  # Guttman transform with unit weights
        sq = (X * X).sum(1)
        dist = np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0, None))
        stress = ((dist - d) ** 2).sum() / 2
        ratio = np.divide(d, dist, out=np.zeros_like(d), where=dist > 1e-12)
        Bx = -ratio
        np.fill_diagonal(Bx, 0.0)
        np.fill_diagonal(Bx, -Bx.sum(1))
        X = Bx @ X / N
        if prev - stress < STRESS_TOLERANCE * max(prev, 1e-12):
            break
        prev = stress
    return X - X.mean(0)
