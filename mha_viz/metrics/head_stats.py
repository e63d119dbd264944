"""Per-head statistics of attention patterns and importance (`docs/head-metrics.md`, sections 1
and 3): the head table, the detector patterns and the pattern classes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from mha_viz.capture.run import AttentionRun
from mha_viz.compiled import thread_count
from mha_viz.metrics.head_writes import Weights, as_tensor, on_device, run_weights
from mha_viz.metrics.measures import (
    BLOCK_MASS,
    BROAD_NORM_ENTROPY,
    DIAGONAL_MASS,
    MIXED_MASS,
    MIXED_PART,
    SINK_MASS,
    VERTICAL_MASS,
    metrics_for,
    needing,
)
from mha_viz.metrics.output_norms import head_output_norms
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import TextFacts, measures_from_sums, token_keys
from mha_viz.metrics.row_stats import RowStats
from mha_viz.metrics.row_table import current, weights


def detection_patterns(run: AttentionRun) -> dict[str, np.ndarray]:
    """The (n, n) target patterns P of TransformerLens' head detector, one for each detector score of the row
    table in force (its "share" records: previous token P[i, i-1] = 1; duplicate token P[i, j] = 1 if tok_j =
    tok_i, j < i; induction, the duplicate pattern shifted one column right), as `row_table.weights` gives them."""
    ids = token_keys(run.token_ids, run.tokens)
    return {r.name: weights(r, 0, run.n, ids).astype(float) for r in current() if r.reads == "share"}


# The tensor path's chunks: each float32 (heads, rows, n) temporary stays under 4 MB (about the CPU's L2). Measured
# at n = 128-256 (chunks of whole heads): 4 MB as fast as 8 MB, up to 2x faster than 32 MB (14 MB at n = 224: 17 ms
# against 7).
CHUNK_BYTES = 4 * 2**20


def head_table(run: AttentionRun, weights: Weights | None = None, *,
               device: str | torch.device | None = None) -> pd.DataFrame:
    """One row per (layer, head) with the statistics and the pattern class of `docs/head-metrics.md`,
    section 1.

    Columns: layer, head, the measures of `measures.METRICS` that need only the attention, in its
    order (entropy, norm_entropy, …, induction_score, sink, beyond_norm_entropy, …, beyond_punct), distance_norm
    (distance / n), pattern (diagonal / vertical / broad / block / sink / mixed / heterogeneous: `classify`). With
    `weights` and a run that has head outputs, also the output measures (output_norm,
    mean_output_norm): the catalogue's `needs` decides which measures a run gets (`measures.metrics_for`).
    `device`: where to compute (e.g. the model's "cuda"; default the CPU).
    """
    return pd.DataFrame(head_columns(run, weights, device=device))


def head_columns(run: AttentionRun, weights: Weights | None = None, *,
                 device: str | torch.device | None = None) -> dict:
    """`head_table`'s columns as a dict of flat (L·H,) arrays, layer-major (the pattern a list),
    without building a DataFrame: what a corpus job adds up document by document. A long run's pattern
    columns are its scan's (`run.summary.table`: the same columns and definitions), made with the run."""
    table = None if run.is_dense or run.summary is None else run.summary.table
    data = (pattern_columns(pattern_stats(run, device=device), run.layer_ids, run.n) if table is None else
            {c: table[c].tolist() if c == "pattern" else table[c].to_numpy() for c in table.columns})
    has = metrics_for(outputs=run.head_outputs is not None, weights=weights is not None)
    from_outputs = [name for name in needing("outputs") if name in has]
    if from_outputs:
        values = head_output_norms(run, weights, device=device)
        data.update((name, values[name].ravel()) for name in from_outputs)
    # the weights' own (`mha_viz.circuits.copying_scores`, added by whoever has the model); NaN without
    if "copying" in has:
        copying = run_weights(run, weights).get("copying")
        data["copying"] = (np.full(run.num_layers * run.num_heads, np.nan, dtype=np.float32) if copying is None
                           else as_tensor(copying).float().numpy().ravel())
    return data


def pattern_columns(stats: dict[str, np.ndarray], layer_ids: list[int], n: int) -> dict:
    """The head table's pattern columns from `pattern_stats`' (L, H) arrays (or a long text's, `mha_viz.scan`):
    layer, head, the measures, distance_norm and pattern, each flat (L·H,), layer-major."""
    cols = dict(stats)
    cols["distance_norm"] = cols["distance"] / n
    in_segment = cols.pop("in_segment")
    L, H = np.shape(in_segment)
    layers, heads = np.meshgrid(np.asarray(layer_ids), np.arange(H), indexing="ij")
    data = {"layer": layers.ravel(), "head": heads.ravel()}  # the model's layer numbers
    data.update((name, np.asarray(values).ravel()) for name, values in cols.items())
    rule = {name: data[name].tolist() for name in RULE_INPUTS if name != "in_segment"}
    rule["in_segment"] = np.ravel(in_segment).tolist()
    data["pattern"] = [classify(dict(zip(rule, values))) for values in zip(*rule.values())]
    return data


def pattern_stats(run: AttentionRun, *, compiled: bool | None = None,
                  device: str | torch.device | None = None) -> dict[str, np.ndarray]:
    """The (L, H) statistics of `docs/head-metrics.md`, section 1 (the head table's columns, and
    `in_segment`: the worst row's mass inside its own segment), by the row measures' definition
    (`row_measures`) over each head's whole matrix. `compiled`: one compiled pass over every head
    (`row_kernels`, the CPU's way), or tensor operations on chunks of heads (`row_stats`, any device's way);
    None picks the first on the CPU. Both agree within float32 rounding and give the same pattern classes.
    `device`: where to compute (default the CPU)."""
    on_cpu = device is None or torch.device(device).type == "cpu"
    L, H, n = run.num_layers, run.num_heads, run.n
    facts = TextFacts.of_run(run)
    if on_cpu if compiled is None else compiled:
        sums = BlockSums(L * H, facts, threads=thread_count())
        sums.add(np.ascontiguousarray(run.attentions.reshape(L * H, n, n), dtype=np.float32), 0, 0)
        stats = measures_from_sums(sums.finish()[0], n, facts.table)
    else:
        stats = _by_tensors(facts, on_device(run.attentions.reshape(L * H, n, n), device))
    return {name: stats[name].reshape(L, H) for name in facts.table.stat_names}


def _by_tensors(facts: TextFacts, flat: torch.Tensor) -> dict[str, np.ndarray]:
    """The measures of every head of `flat` (N, n, n), in chunks of heads and blocks of their rows whose
    float32 temporaries stay within CHUNK_BYTES (a causal block's keys stop at its last row's)."""
    N, n = flat.shape[0], facts.n
    heads = max(1, CHUNK_BYTES // (4 * n * n))
    parts = []
    for h0 in range(0, N, heads):
        chunk = flat[h0:h0 + heads]
        stats = RowStats(facts, chunk.shape[0], flat.device)
        rows = max(1, CHUNK_BYTES // (4 * n * chunk.shape[0]))
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            stats.add(chunk[:, r0:r1, :r1 if facts.causal else n], r0, 0)
        parts.append(stats.finish())
    return {name: np.concatenate([p[name] for p in parts]) for name in facts.table.stat_names}


# What `classify` reads of a head (`pattern_stats`' names): the measures beyond the sink, the sink
# mass, and the shares of the whole attention that name a mixed head (MIXED_SHARES)
MIXED_SHARES = {"sink": "sink", "self": "self", "prev": "prev", "next": "next", "sep": "sep", "punct": "punct",
                "duplicate": "duplicate_score", "induction": "induction_score"}
RULE_INPUTS = ("beyond_norm_entropy", "beyond_self", "beyond_prev", "beyond_next", "beyond_sep", "beyond_punct",
               "in_segment", *dict.fromkeys(MIXED_SHARES.values()))


def classify(head) -> str:
    """Pattern class of one head by the rules of `docs/head-metrics.md`, section 1, in order, later
    rules overriding earlier ones. `head`: a mapping with the names of RULE_INPUTS (a row of the head
    table, or `pattern_stats`' values of one head). The type reads the attention beyond the sink;
    "sink" is a head mostly on the sink with no clear type beyond it; "mixed:a+b" a heterogeneous head
    whose two largest shares of its attention (MIXED_SHARES) say what it does."""
    label = "heterogeneous"
    if head["beyond_norm_entropy"] > BROAD_NORM_ENTROPY:
        label = "broad"
    diag = {"self": head["beyond_self"], "prev": head["beyond_prev"], "next": head["beyond_next"]}
    best = max(diag, key=diag.get)
    if diag[best] > DIAGONAL_MASS:
        label = f"diagonal:{best}"
    vert = {"sep": head["beyond_sep"], "punct": head["beyond_punct"]}
    if sum(vert.values()) > VERTICAL_MASS:
        label = f"vertical:{max(vert, key=vert.get)}"
    if head["in_segment"] > BLOCK_MASS:
        label = "block"
    if label in ("heterogeneous", "broad") and head["sink"] > SINK_MASS:
        label = "sink"
    if label == "heterogeneous":
        shares = {name: head[column] for name, column in MIXED_SHARES.items()}
        top = sorted(shares, key=lambda name: -shares[name] if np.isfinite(shares[name]) else np.inf)[:2]
        if shares[top[1]] >= MIXED_PART and shares[top[0]] + shares[top[1]] >= MIXED_MASS:
            label = f"mixed:{top[0]}+{top[1]}"
    return label

