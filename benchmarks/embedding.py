"""The 2-D maps of the app, scikit-learn's against the ones this project wrote by hand (issue 23).

Run: `.venv/bin/python benchmarks/embedding.py [--repeat 5] [--synthetic]`.

The inputs are the app's own. t-SNE: the queries and keys of a MiniLM head at 64 tokens (the
query/key map's 128 points, as `qk.qk_map` stacks them). MDS: the JS dissimilarities between the
heads of MiniLM (72) and SmolLM2 (270) on a 64-token text, as the Head similarity page maps them
(`--synthetic`: random dissimilarity matrices of those sizes instead of loading the models).

Each side runs on the same input in this one process: wall time is the median of `--repeat` runs;
quality is computed by one function for both maps: t-SNE's KL(P ‖ Q) with P from the same
perplexity (scikit-learn's own `kl_divergence_` printed beside it as a check), and MDS's Kruskal
stress-1, √(Σ (d_ij − ‖x_i − x_j‖)² / Σ d_ij²) over the pairs. Ratios are ours ÷ scikit-learn's:
below 1, ours is faster or fits better.

"Ours" is the hand-written code as it was in the package before scikit-learn replaced it, kept
here (`hand_tsne`, `hand_mds`) so that the comparison can be run again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import sklearn  # noqa: E402

import mha_viz  # noqa: E402
from mha_viz import metrics  # noqa: E402
from mha_viz.views import qk, teaching  # noqa: E402

TEXT = ("The old lighthouse keeper climbed the stairs every evening, lit the lamp, and watched the "
        "ships pass the rocks below. One stormy night a small boat lost its way in the fog, and the "
        "keeper rang the bell until the sailors found the harbour. In the morning they thanked him "
        "with bread, fish and a letter from the captain.")
QK_HEADS = ((2, 3), (5, 0))  # (layer, head) of MiniLM
PERPLEXITY = 15.0
# ours beats scikit-learn's only when both hold at once (time ratio, quality ratio)
FASTER_BY, BETTER_BY = 0.9, 0.99


# ---- the hand-written versions, as removed from mha_viz/views/qk.py and mha_viz/metrics/layout.py ----

def conditional_p(d2: np.ndarray, perplexity: float) -> np.ndarray:
    """Row-wise Gaussian affinities with each row's entropy at log(perplexity) (binary search on
    the precision β); the P of both t-SNEs' KL below."""
    n = len(d2)
    P = np.zeros((n, n))
    target = np.log(perplexity)
    for a in range(n):
        d = np.delete(d2[a], a)
        lo, hi, beta = 0.0, np.inf, 1.0
        for _ in range(64):
            e = np.exp(-(d - d.min()) * beta)
            s = e.sum()
            p = e / s
            H = np.log(s) + beta * ((d - d.min()) * p).sum()
            if abs(H - target) < 1e-5:
                break
            if H > target:
                lo, beta = beta, beta * 2 if hi == np.inf else (beta + hi) / 2
            else:
                hi, beta = beta, (beta + lo) / 2
        P[a, np.arange(n) != a] = p
    return P


def joint_p(x: np.ndarray, perplexity: float) -> np.ndarray:
    """t-SNE's symmetric P (N, N): (P_j|i + P_i|j) / 2N, floored at 1e-12."""
    sq = (x ** 2).sum(1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0)
    P = conditional_p(d2, perplexity)
    return np.maximum((P + P.T) / (2 * len(x)), 1e-12)


def hand_tsne(x: np.ndarray, perplexity: float = PERPLEXITY, iterations: int = 500, seed: int = 0) -> np.ndarray:
    """Exact t-SNE in numpy: momentum 0.5 → 0.8, gains, early exaggeration 12 for 100 steps,
    started from the PCA layout scaled to sd 1e-4."""
    N = len(x)
    P = joint_p(x, min(perplexity, (N - 1) / 3))
    y = qk.pca_2d(x)
    sd = y[:, 0].std() or 1.0
    y = y / sd * 1e-4 + np.random.default_rng(seed).normal(0, 1e-6, y.shape)
    velocity, gains = np.zeros_like(y), np.ones_like(y)
    for it in range(iterations):
        exaggeration = 12.0 if it < 100 else 1.0
        yy = (y ** 2).sum(1)
        num = 1.0 / (1.0 + yy[:, None] + yy[None, :] - 2 * y @ y.T)
        np.fill_diagonal(num, 0.0)
        Q = np.maximum(num / num.sum(), 1e-12)
        W = (exaggeration * P - Q) * num
        grad = 4 * (np.diag(W.sum(1)) - W) @ y
        gains = np.where(np.sign(grad) != np.sign(velocity), gains + 0.2, gains * 0.8).clip(0.01)
        velocity = (0.5 if it < 250 else 0.8) * velocity - 200.0 * gains * grad
        y = y + velocity
        y -= y.mean(0)
    return y


def hand_mds(d: np.ndarray, iterations: int = 300, seed: int = 0, tolerance: float = 1e-5) -> np.ndarray:
    """Metric MDS: SMACOF (unit weights) from classical MDS, stopping at a relative change of
    stress below `tolerance`."""
    N = d.shape[0]
    J = np.eye(N) - 1.0 / N
    B = -0.5 * J @ (d ** 2) @ J
    vals, vecs = np.linalg.eigh(B)
    order = np.argsort(vals)[::-1][:2]
    X = vecs[:, order] * np.sqrt(np.clip(vals[order], 1e-12, None))
    X += np.random.default_rng(seed).normal(scale=1e-6, size=X.shape)
    prev = np.inf
    for _ in range(iterations):
        sq = (X * X).sum(1)
        dist = np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0, None))
        stress = ((dist - d) ** 2).sum() / 2
        ratio = np.divide(d, dist, out=np.zeros_like(d), where=dist > 1e-12)
        Bx = -ratio
        np.fill_diagonal(Bx, 0.0)
        np.fill_diagonal(Bx, -Bx.sum(1))
        X = Bx @ X / N
        if prev - stress < tolerance * max(prev, 1e-12):
            break
        prev = stress
    return X - X.mean(0)


# ---- quality, one function per map for both sides ----

def kl(P: np.ndarray, y: np.ndarray) -> float:
    """KL(P ‖ Q) of a 2-D map y (N, 2), Q its Student-t similarities (as t-SNE minimises)."""
    yy = (y ** 2).sum(1)
    num = 1.0 / (1.0 + np.maximum(yy[:, None] + yy[None, :] - 2 * y @ y.T, 0))
    np.fill_diagonal(num, 0.0)
    Q = np.maximum(num / num.sum(), 1e-12)
    off = ~np.eye(len(P), dtype=bool)
    return float((P[off] * np.log(P[off] / Q[off])).sum())


def stress1(d: np.ndarray, x: np.ndarray) -> float:
    """Kruskal's stress-1 of a map x (N, 2) against dissimilarities d (N, N)."""
    iu = np.triu_indices(len(d), 1)
    got = np.linalg.norm(x[:, None] - x[None], axis=-1)[iu]
    return float(np.sqrt(((d[iu] - got) ** 2).sum() / (d[iu] ** 2).sum()))


def barnes_hut(x: np.ndarray) -> np.ndarray:
    """scikit-learn's default t-SNE method, otherwise as `qk.fit_tsne`."""
    from sklearn.manifold import TSNE

    return TSNE(perplexity=min(PERPLEXITY, (len(x) - 1) / 3), init="pca", method="barnes_hut",
                random_state=0).fit_transform(x)


def timed(fn, repeat: int):
    """(median seconds of `repeat` runs, the last result)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


# ---- the inputs ----

def qk_inputs() -> list[tuple[str, np.ndarray]]:
    """The stacked [q; k] (128, d_k) of the query/key map, for each head of QK_HEADS."""
    model = mha_viz.load_model("minilm", device="cpu")
    rec = teaching.record(model, TEXT)
    out = []
    for layer, head in QK_HEADS:
        w = teaching.walkthrough(model, TEXT, layer, head, recording=rec)
        out.append((f"minilm L{layer} H{head}, {w.n} tokens", np.vstack([w.Q, w.K]).astype(np.float64)))
    return out


def mds_inputs(synthetic: bool) -> list[tuple[str, np.ndarray]]:
    """The JS dissimilarities between every head (the Head similarity page's map input)."""
    if synthetic:
        rng = np.random.default_rng(0)
        out = []
        for name, n in (("minilm", 72), ("smollm2", 270)):
            pts = rng.normal(size=(n, 8)) * rng.uniform(0.2, 1, size=8)  # higher-dimensional: stress > 0
            out.append((f"{n} synthetic heads", np.linalg.norm(pts[:, None] - pts[None], axis=-1)))
        return out
    out = []
    for name in ("minilm", "smollm2"):
        model = mha_viz.load_model(name, device="cpu")
        run = mha_viz.analyze(model, TEXT, max_tokens=64)
        d = metrics.as_dissimilarity(metrics.head_similarity(run, "js"), "js")
        out.append((f"{name}, {run.num_layers * run.num_heads} heads, JS at {run.n} tokens", d))
        del model
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--synthetic", action="store_true", help="random MDS inputs, no model load")
    parser.add_argument("--barnes-hut", action="store_true",
                        help="also time scikit-learn's Barnes-Hut t-SNE (its default method), once per input")
    args = parser.parse_args()
    print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}, {os.cpu_count()} CPU cores; "
          f"median of {args.repeat} runs; ratios are ours ÷ scikit-learn's")
    verdicts: dict[str, list[tuple[float, float]]] = {"t-SNE": [], "MDS": []}

    print("\nt-SNE of the query/key map (perplexity 15); KL(P ‖ Q), one P for both")
    print(f"| {'input':32s} | {'ours s':>7s} | {'sk s':>7s} | {'time ratio':>10s} | {'ours KL':>7s} | "
          f"{'sk KL':>7s} | {'sk kl_divergence_':>17s} | {'KL ratio':>8s} |")
    print(f"|{'-' * 34}|{'-' * 9}|{'-' * 9}|{'-' * 12}|{'-' * 9}|{'-' * 9}|{'-' * 19}|{'-' * 10}|")
    for name, x in qk_inputs():
        P = joint_p(x, min(PERPLEXITY, (len(x) - 1) / 3))
        t_ours, y_ours = timed(lambda: hand_tsne(x), args.repeat)
        t_sk, y_sk = timed(lambda: qk.tsne_2d(x), args.repeat)
        k_ours, k_sk = kl(P, y_ours), kl(P, y_sk)
        check = qk.fit_tsne(x).kl_divergence_
        print(f"| {name:32s} | {t_ours:7.3f} | {t_sk:7.3f} | {t_ours / t_sk:10.2f} | {k_ours:7.4f} | "
              f"{k_sk:7.4f} | {check:17.4f} | {k_ours / k_sk:8.3f} |")
        verdicts["t-SNE"].append((t_ours / t_sk, k_ours / k_sk))
        if args.barnes_hut:
            t_bh, y_bh = timed(lambda: barnes_hut(x), 1)
            print(f"|   Barnes-Hut instead of exact: {t_bh:7.3f} s, KL {kl(P, y_bh):.4f} "
                  f"({kl(P, y_bh) / k_sk:.3f} × exact's) |")

    print("\nMetric MDS of the head map; Kruskal's stress-1")
    print(f"| {'input':44s} | {'ours ms':>7s} | {'sk ms':>7s} | {'time ratio':>10s} | {'ours s-1':>8s} | "
          f"{'sk s-1':>8s} | {'stress ratio':>12s} |")
    print(f"|{'-' * 46}|{'-' * 9}|{'-' * 9}|{'-' * 12}|{'-' * 10}|{'-' * 10}|{'-' * 14}|")
    for name, d in mds_inputs(args.synthetic):
        t_ours, x_ours = timed(lambda: hand_mds(d), args.repeat)
        t_sk, x_sk = timed(lambda: metrics.mds(d), args.repeat)
        s_ours, s_sk = stress1(d, x_ours), stress1(d, x_sk)
        print(f"| {name:44s} | {t_ours * 1000:7.1f} | {t_sk * 1000:7.1f} | {t_ours / t_sk:10.2f} | "
              f"{s_ours:8.4f} | {s_sk:8.4f} | {s_ours / s_sk:12.3f} |")
        verdicts["MDS"].append((t_ours / t_sk, s_ours / s_sk))

    print(f"\nOurs is kept only where, on every input, it takes under {FASTER_BY:.0%} of scikit-learn's time "
          f"and fits at least {1 - BETTER_BY:.0%} better (lower KL or stress):")
    for family, where in (("t-SNE", "mha_viz.views.qk.tsne_2d"), ("MDS", "mha_viz.metrics.mds")):
        rows = verdicts[family]
        faster = all(t < FASTER_BY for t, _ in rows)
        better = all(q < BETTER_BY for _, q in rows)
        why = ("faster and better" if faster and better else
               f"{'faster' if faster else 'not faster'}, {'better' if better else 'not better'}")
        kept = "ours" if faster and better else f"scikit-learn's ({where})"
        print(f"- {family}: ours is {why}: kept {kept}.")

if __name__ == "__main__":
    main()
