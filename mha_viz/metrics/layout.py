"""Layouts of a dissimilarity matrix for the views: a clustered order (scipy) and a 2-D map
(metric MDS, scikit-learn)."""

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


def mds(dissimilarity: np.ndarray, *, dim: int = 2, iterations: int = 300, seed: int = 0) -> np.ndarray:
    """Metric MDS (scikit-learn's SMACOF, started from classical MDS): (N, dim) points, centred,
    whose distances match the dissimilarities (N, N) as well as possible (Clark et al. 2019 map
    heads this way from JS)."""
    from sklearn.manifold import MDS  # imported when first used, as scipy above

    d = np.asarray(dissimilarity, dtype=np.float64)
    N = d.shape[0]
    if N <= dim:
        return np.eye(N, dim)
    d = 0.5 * (d + d.T)  # scikit-learn refuses a matrix asymmetric by rounding
    X = MDS(n_components=dim, metric_mds=True, metric="precomputed", init="classical_mds",
            max_iter=iterations, normalized_stress=True, random_state=seed).fit_transform(d)
    return X - X.mean(0)
