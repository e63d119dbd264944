"""Attention followed across layers (`docs/head-metrics.md`, section 4): rollout, rollout through one head, and
attention flow."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from mha_viz.budget import capture_budget
from mha_viz.capture.run import AttentionRun
from mha_viz.metrics.row_blocks import head_mean

# rollout's precision (`rollout(dtype=)` for another): the probabilities it multiplies are float32 already. SmolLM2's
# 30 layers at 4,096 tokens: within 1.3e-6 of float64 (a typical entry is 1/4,096 ≈ 2.4e-4), half the bytes
# (1.9 GiB), 10.5 s against 15.8 s on 2 cores (0.66 ×, benchmarks/rollout.py)
DTYPE = torch.float32


def _layer_list(layer_ids: list[int]) -> str:
    return ", ".join(map(str, layer_ids))


def rollout(run: AttentionRun, *, device: str | torch.device | None = None,
            dtype: torch.dtype | None = None) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): (layers, n, n), row i of layer l says how much
    token i at layer l draws on each input token. Â_l = rows-renormalised 0.5·mean_h A_l + 0.5·I;
    R_1 = Â_1, R_l = Â_l R_{l-1}. Rows sum to 1. `device`: where to compute (e.g. the model's
    "cuda"; default the CPU); the result is a numpy array in `dtype` (default `DTYPE`, float32) either way.

    Each layer's head mean is read a block of rows at a time (`row_blocks.head_mean`), so no head's
    array of every layer is built; what rollout holds (its result, L·n² float32, and one layer's Â) is
    admitted by the capture budget (`check_rollout`), else refused with the length that fits. One layer's
    alone holds three n × n: `rollout_layer`."""
    _check_from_first(run)
    dtype = dtype or DTYPE
    check_rollout(run, dtype)
    out = torch.empty((run.num_layers, run.n, run.n), dtype=dtype, device=device or "cpu")
    _roll(run, run.num_layers - 1, dtype, out.device, lambda layer: out[layer])
    return out.cpu().numpy()


def rollout_layer(run: AttentionRun, layer: int, *, device: str | torch.device | None = None,
                  dtype: torch.dtype | None = None) -> np.ndarray:
    """`rollout(run)[layer]` alone (n, n), the same values: the products up to `layer` in two n × n buffers taking
    turns, so that it holds three n × n with the next layer's mean (`check_rollout(whole=False)`) whatever the
    number of layers; a text whose rollout of every layer is over the capture budget (SmolLM2 at 8,192 tokens:
    7.8 GiB) still has each layer's (0.75 GiB), at the cost of the layers below it each time."""
    _check_from_first(run)
    dtype = dtype or DTYPE
    check_rollout(run, dtype, whole=False)
    layer = range(run.num_layers)[layer]
    buffers = [torch.empty((run.n, run.n), dtype=dtype, device=device or "cpu") for _ in range(min(2, layer + 1))]
    return _roll(run, layer, dtype, buffers[0].device, lambda k: buffers[k % 2]).cpu().numpy()


def _roll(run: AttentionRun, upto: int, dtype: torch.dtype, device: torch.device, into) -> torch.Tensor:
    """R_0 … R_upto, R_l written to `into(l)` (an (n, n) tensor, not the one of l − 1); the last one. Each layer's
    Â is let go before the next layer's mean is made: R_{l−1}, R_l and one mean held at most."""
    rolled = None
    for layer in range(upto + 1):
        A_hat = _hat(torch.from_numpy(head_mean(run, layer, dtype)).to(device))
        out = into(layer)
        if rolled is None:
            out.copy_(A_hat)
        else:
            _product(run, A_hat, rolled, out)
        rolled = out
        del A_hat
    return rolled


def _product(run: AttentionRun, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out = a @ b for two of `run`'s (n, n) matrices: a causal run's are lower-triangular, multiplied by blocks
    past one block (`_lower_matmul`)."""
    if run.is_causal and run.n > LOWER_BLOCK:
        _lower_matmul(a, b, out)
    else:
        torch.matmul(a, b, out=out)


LOWER_BLOCK = 512  # rows and columns of one block of `_lower_matmul`


def _lower_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out = a @ b for lower-triangular a and b (n, n) (a causal run's Â and rollout), block by block:
    block (I, J) of the product sums a[I, K] b[K, J] over the blocks J ≤ K ≤ I only, the others being
    zero: a quarter of the dense product's multiplications at 4,096 tokens (a sixth as n grows), and
    measured 2.1 times faster there on 2 cores (the Across layers page of SmolLM2 at 4,096 tokens:
    37 s, was 54 s, in float64). The same sums but for exact zeros, rounded in another order; the
    upper triangle exact zeros."""
    n = a.shape[0]
    for i0 in range(0, n, LOWER_BLOCK):
        i1 = min(n, i0 + LOWER_BLOCK)
        out[i0:i1, i1:] = 0
        for j0 in range(0, i1, LOWER_BLOCK):
            j1 = min(n, j0 + LOWER_BLOCK)
            torch.matmul(a[i0:i1, j0:i1], b[j0:i1, j0:j1], out=out[i0:i1, j0:j1])


def _hat(mean: torch.Tensor) -> torch.Tensor:
    """Â = rows-renormalised ½·mean + ½·I, in place ((n, n), in the mean's precision)."""
    mean.mul_(0.5).diagonal().add_(0.5)
    return mean.div_(mean.sum(-1, keepdim=True))


def rollout_bytes(layers: int, n: int, dtype: torch.dtype | None = None) -> int:
    """What rollout holds: its result (layers, n, n) in `dtype` (`DTYPE`) and one layer's Â beside it."""
    return (dtype or DTYPE).itemsize * (layers + 1) * n * n


def check_rollout(run: AttentionRun, dtype: torch.dtype | None = None, *, whole: bool = True) -> None:
    """Refuse rollout in `dtype` (`DTYPE`) and what reads it when it would not fit the capture budget, naming
    the length that does (an InputError, before anything runs). whole: every layer's (`rollout`), else one
    layer's (`rollout_layer`: two products and one Â, as `rollout_bytes` counts two layers)."""
    L, dtype = run.num_layers, dtype or DTYPE
    held = L if whole else 2
    fits = int((capture_budget.capture_budget() / rollout_bytes(held, 1, dtype)) ** 0.5)
    what = f"{L} layers of n × n" if whole else "one layer's: three n × n"
    capture_budget.check(
        rollout_bytes(held, run.n, dtype), f"Rollout of {run.model_name} at {run.n} tokens ({what} "
        f"in {str(dtype).removeprefix('torch.')})", f"it takes at most {fits} tokens of this model here: lower the "
        "token limit in the sidebar (or max_tokens), or raise the limit.")


def _check_from_first(run: AttentionRun) -> None:
    if not run.from_first_layer:
        raise ValueError(f"rollout and flow follow every layer from the first; this run holds layers "
                         f"{_layer_list(run.layer_ids)} of {run.model_layers} only (a layer subset, or a hybrid "
                         "model's softmax-attention layers: its other layers have no attention pattern to follow)")


def _residual_attention(run: AttentionRun, layers: int) -> np.ndarray:
    """Â_l = rows-renormalised ½·mean_h A_l + ½·I for the first `layers` layers, float64
    (layers, n, n), each layer's head mean read a block of rows at a time: the graph flow walks
    (rollout computes the same in torch)."""
    _check_from_first(run)
    return np.stack([_hat(torch.from_numpy(head_mean(run, layer))).numpy() for layer in range(layers)])


def rollout_through_head(run: AttentionRun, layer: int, head: int,
                         rolled: np.ndarray | None = None, *, below: np.ndarray | None = None) -> np.ndarray:
    """The per-head variant of rollout: A_{l,h} R_{l-1} (n, n), with R_{-1} = I (rows sum to 1), float32 (or
    R's precision where it is higher). `rolled`: `rollout(run)` when the caller has it already, or `below`:
    R_{l-1} alone (`rollout_layer`), not both; neither: R_{l-1} is computed (`rollout_layer`)."""
    if rolled is not None and below is not None:
        raise ValueError("rollout_through_head takes rolled (every layer's rollout) or below (R_{l-1}), not both")
    A = run.head(layer, head).astype(np.float32, copy=False)
    if layer == 0:
        return A
    if below is None:
        below = rollout_layer(run, layer - 1) if rolled is None else rolled[layer - 1]
    with warnings.catch_warnings():  # a cached run's head or R is read-only: both are only read here
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        A, R = torch.from_numpy(A), torch.from_numpy(below)
    dtype = torch.promote_types(A.dtype, R.dtype)
    out = torch.empty((run.n, run.n), dtype=dtype)
    _product(run, A.to(dtype), R.to(dtype), out)
    return out.numpy()


FLOW_MAX_TOKENS = 64  # max-flow over every (query, input token) pair grows as n⁴; see `flow`


_FLOW_SCALE = 1_000_000  # capacities become integers (scipy's max-flow needs them): 1e-6 resolution


def flow(run: AttentionRun, layer: int | None = None) -> np.ndarray:
    """Attention flow (Abnar & Zuidema 2020): (n, n), entry [i, j] is the maximum flow from
    token i after `layer` (default the last) down to input token j in the layered graph whose
    edges from (l, i) to (l − 1, j) have capacity Â_l[i, j] (Â as in `rollout`), in integer
    units of 1 / _FLOW_SCALE.

    Each row is then divided by its sum, as the authors' code does, so rows compare with
    rollout. One max-flow per (i, j) pair that a path joins, each on the part of the graph that
    lies on some path from i to j (nodes the source reaches and that reach the sink: removing
    the others leaves every max-flow value unchanged). For a causal model that part holds the
    tokens j..i only, so half the pairs need no max-flow and the rest are small: about 1.5 s
    for 30 layers at n = 64 on 2 cores; a bidirectional model keeps the whole graph, n² max-flows
    over L·n² edges. Offered only for n ≤ FLOW_MAX_TOKENS.
    """
    # scipy is heavy and needed only here: imported when first used, not with the package
    from scipy.sparse.csgraph import maximum_flow

    n = run.n
    if n > FLOW_MAX_TOKENS:
        raise ValueError(f"flow is offered for inputs of at most {FLOW_MAX_TOKENS} tokens "
                         f"(it needs n² max-flow problems over L·n² edges); this one has {n}. Use rollout.")
    top = run.num_layers - 1 if layer is None else layer
    cap = np.rint(_residual_attention(run, top + 1) * _FLOW_SCALE).astype(np.int32)  # (K, n, n)
    down, up = _reach(cap > 0)
    out = np.zeros((n, n))
    for i in range(n):
        for j in np.flatnonzero(up[-1][:, i]):  # the sinks that source i reaches at all
            graph = _pair_graph(cap, down[:, i] & up[:, j])
            out[i, j] = maximum_flow(graph, graph.shape[0] - 1, 0, method="dinic").flow_value
    return out / out.sum(1, keepdims=True)


def _reach(edge: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the layered graph with edges (k + 1, a) -> (k, b) where edge[k, a, b], levels 0..K:
    down[k, i, a] says that (k, a) is reachable from the source (K, i), up[k, j, a] that (k, a)
    reaches the sink (0, j); both (K + 1, n, n) bool."""
    K, n = edge.shape[0], edge.shape[1]
    e = edge.astype(np.float32)  # 0/1 products count paths' last steps exactly (≤ n)
    eye = np.eye(n, dtype=bool)
    down, up = np.empty((K + 1, n, n), dtype=bool), np.empty((K + 1, n, n), dtype=bool)
    down[K], up[0] = eye, eye
    for k in range(K - 1, -1, -1):
        down[k] = down[k + 1].astype(np.float32) @ e[k] > 0
    for k in range(K):
        up[k + 1] = up[k].astype(np.float32) @ e[k].T > 0
    return down, up


def _pair_graph(cap: np.ndarray, keep: np.ndarray):
    """The CSR graph of the nodes `keep` (K + 1, n) and the edges among them with capacity > 0,
    numbered level by level from level 0 (the sink, node 0) up to level K (the source, last);
    only the span of token positions that holds kept nodes is looked at."""
    from scipy.sparse import csr_matrix  # heavy, needed only by flow

    n = keep.shape[1]
    used = keep.any(0)
    lo, hi = int(used.argmax()), n - int(used[::-1].argmax())
    w, keep = hi - lo, keep[:, lo:hi]
    ids = np.cumsum(keep.ravel()) - 1  # node number of (level, lo + position)
    size = int(ids[-1]) + 1
    c = cap[:, lo:hi, lo:hi]
    k, a, b = np.nonzero(keep[1:, :, None] & keep[:-1, None, :] & (c > 0))  # row-major: sorted CSR order
    rows = ids[(k + 1) * w + a]
    indptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=size), out=indptr[1:])
    return csr_matrix((c[k, a, b], ids[k * w + b], indptr), shape=(size, size))
