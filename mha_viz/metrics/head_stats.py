"""Per-head statistics of attention patterns and importance (`docs/head-metrics.md`, sections 1
and 3): the head table, the detector patterns and the pattern classes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mha_viz.capture.run import AttentionRun
from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.compiled import thread_count
from mha_viz.metrics.head_kernels import BEYOND, MEASURED, SUMS, TARGETS, TOTAL, pattern_sums
from mha_viz.metrics.head_writes import Weights, as_tensor, on_device, run_weights
from mha_viz.metrics.measures import (
    BLOCK_MASS,
    BROAD_NORM_ENTROPY,
    CHOICE_KEYS,
    DIAGONAL_MASS,
    ENTROPY_SMOOTHING,
    MIXED_MASS,
    MIXED_PART,
    PUNCTUATION,
    SINK_MASS,
    VERTICAL_MASS,
    metrics_for,
    needing,
)
from mha_viz.metrics.output_norms import head_output_norms
from mha_viz.text.readable import bare


def _valid(run: AttentionRun) -> np.ndarray:
    """(n, n) bool: the keys each query may see (all, or j <= i for a causal run)."""
    n = run.n
    full = np.ones((n, n), dtype=bool)
    return np.tril(full) if run.is_causal else full


def token_keys(token_ids: list[int], tokens: list[str]) -> np.ndarray:
    """One integer per token for equality tests (the duplicate and induction detectors): the token
    ids when known, else the display text's."""
    if token_ids:
        return np.asarray(token_ids)
    _, inverse = np.unique(np.asarray(tokens, dtype=object).astype(str), return_inverse=True)
    return inverse


def _ids(run: AttentionRun) -> np.ndarray:
    return token_keys(run.token_ids, run.tokens)


# TransformerLens' detector scores (`detection_patterns`), in the catalogue's order (`measures.METRICS`)
DETECTORS = ("prev_token_score", "duplicate_score", "induction_score")
# `pattern_stats`' columns, in the catalogue's order: the compiled pass's measures, the detector scores,
# the sink mass and the measures beyond the sink, then in_segment (beyond the sink, for the block rule)
STAT_NAMES = (*MEASURED, *DETECTORS, *BEYOND, "in_segment")


def first_is_sink(run) -> bool:
    """Whether the run's first key is its sink: its first token is the text's first (not hidden by
    `drop_tokens`; a run with the first token hidden has no sink left but a learned one)."""
    return run.n > 0 and (run.hidden is None or int(run.hidden.kept[0]) == 0)


def detection_patterns(run: AttentionRun) -> dict[str, np.ndarray]:
    """The (n, n) target patterns P of TransformerLens' head detector.

    previous-token: P[i, i-1] = 1; duplicate-token: P[i, j] = 1 if tok_j = tok_i, j < i;
    induction: the duplicate pattern shifted one column right, P[i, j+1] = 1 if tok_j = tok_i, j < i.
    """
    n = run.n
    ids = _ids(run)
    prev = np.eye(n, k=-1)
    earlier = np.tril(np.ones((n, n), dtype=bool), -1)
    dup = (ids[:, None] == ids[None, :]) & earlier
    induction = np.zeros((n, n))
    induction[:, 1:] = dup[:, :-1]
    return dict(zip(DETECTORS, (prev, dup.astype(float), induction)))


def segments(special_mask: list[bool]) -> np.ndarray | None:
    """Segment index per token for two-segment inputs ([CLS] a [SEP] b [SEP]), else None."""
    special = np.asarray(special_mask, dtype=bool)
    n = len(special)
    inner = [i for i in np.flatnonzero(special) if 0 < i < n - 1]
    if len(inner) != 1:
        return None
    seg = np.zeros(n, dtype=int)
    seg[inner[0] + 1:] = 1
    return seg


# Heads per chunk in the batched path: each float32 (chunk, n, n) temporary stays under 4 MB (about the CPU's
# L2). Measured at n = 128-256: 4 MB as fast as 8 MB, up to 2x faster than 32 MB (14 MB at n = 224: 17 ms vs 7).
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


@dataclass(frozen=True)
class _Setup:
    """What every head's statistics share, computed once a run: smoothing floor, distances,
    token columns, detector targets and segments."""

    floor: torch.Tensor  # the smoothing mass on each visible key: scalar, or (n, n) for causal runs
    rows: torch.Tensor  # (n,) bool: rows that see more than one key
    log_k: torch.Tensor  # ln k_i of those rows, float64
    dist: torch.Tensor  # (n²,) float32: |i − j|
    columns: torch.Tensor  # (n, 3): [SEP]-like, punctuation, ones (one product: sep, punct, total)
    targets: dict  # detector name -> (rows, cols) index tensors of its pattern's ones
    same: torch.Tensor | None  # (n, n) float32: 1 inside a segment, for two-segment inputs
    skip: int  # leading keys that are the sink: 1, or 0 for a run whose first token is hidden
    floor_b: torch.Tensor  # the smoothing mass on each visible key beyond the sink: scalar, or (n, n − skip)
    rows_b: torch.Tensor  # (n,) bool: rows that see at least CHOICE_KEYS keys beyond the sink
    log_kb: torch.Tensor  # (n,) float64: ln(k_i − skip) where that is > 0, else NaN (no entropy to normalise)
    prev_b: torch.Tensor  # (n − 1,) float32: 1 where row i's previous key i − 1 lies beyond the sink

    def to(self, device: torch.device) -> "_Setup":
        """The same tensors on `device` (itself on the CPU)."""
        if device.type == "cpu":
            return self
        return _Setup(floor=self.floor.to(device), rows=self.rows.to(device), log_k=self.log_k.to(device),
                      dist=self.dist.to(device), columns=self.columns.to(device),
                      targets={k: (i.to(device), j.to(device)) for k, (i, j) in self.targets.items()},
                      same=None if self.same is None else self.same.to(device), skip=self.skip,
                      floor_b=self.floor_b.to(device), rows_b=self.rows_b.to(device), log_kb=self.log_kb.to(device),
                      prev_b=self.prev_b.to(device))


def _target_pairs(run: AttentionRun) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The ones of `detection_patterns` as (rows, cols), in the same (row-major) order, without
    the dense matrices."""
    return target_pairs(_ids(run))


def target_pairs(ids: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The detectors' target cells (`DETECTORS`: previous token, duplicate, induction) for the tokens `ids`
    (`token_keys`), as (rows, cols) in row-major order."""
    n = len(ids)
    earlier = np.tril(np.ones((n, n), dtype=bool), -1)
    di, dj = np.nonzero((ids[:, None] == ids[None, :]) & earlier)
    shifted = dj < n - 1  # a duplicate in the last column has no column to its right
    return dict(zip(DETECTORS, ((np.arange(1, n), np.arange(n - 1)), (di, dj), (di[shifted], dj[shifted] + 1))))


def _targets(run: AttentionRun) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """`_target_pairs` as int64 index tensors."""
    return {k: (torch.from_numpy(np.asarray(i, dtype=np.int64)), torch.from_numpy(np.asarray(j, dtype=np.int64)))
            for k, (i, j) in _target_pairs(run).items()}


def key_masks(tokens: list[str], special_mask: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """(n,) float32 0/1 masks of the keys: [SEP]-like tokens after the first, and punctuation."""
    special = np.asarray(special_mask, dtype=bool)
    sep = special & (np.arange(len(tokens)) > 0)
    punct = np.array([bare(t) in PUNCTUATION for t in tokens], dtype=bool)  # "␣," is a comma
    return sep.astype(np.float32), punct.astype(np.float32)


def _setup(run: AttentionRun) -> _Setup:
    """The run's shared tensors (what depends on the tokens, not on the heads)."""
    n = run.n
    valid = torch.from_numpy(_valid(run))
    k = valid.sum(1)  # (n,) keys each query sees
    floor = (torch.where(valid, ENTROPY_SMOOTHING / k[:, None].float(), torch.zeros(())) if run.is_causal
             else torch.tensor(ENTROPY_SMOOTHING / n))
    rows = k > 1
    idx = torch.arange(n)
    sep, punct = key_masks(run.tokens, run.special_mask)
    columns = torch.stack([torch.from_numpy(sep), torch.from_numpy(punct), torch.ones(n)], 1)
    seg = segments(run.special_mask)
    skip = int(first_is_sink(run))
    kb = k - skip  # keys beyond the sink each row may see
    floor_b = (torch.where(valid[:, skip:], ENTROPY_SMOOTHING / kb.clamp_min(1)[:, None].float(), torch.zeros(()))
               if run.is_causal else torch.tensor(ENTROPY_SMOOTHING / max(n - skip, 1)))
    log_kb = torch.where(kb > 1, torch.log(kb.clamp_min(1).double()), torch.full((), float("nan"), dtype=torch.float64))
    return _Setup(floor=floor, rows=rows, log_k=torch.log(k[rows].double()),
                  dist=(idx[:, None] - idx[None, :]).abs().float().reshape(-1), columns=columns,
                  targets=_targets(run),
                  same=None if seg is None else torch.from_numpy(seg[:, None] == seg[None, :]).float(),
                  skip=skip, floor_b=floor_b, rows_b=(idx >= skip) & (kb >= CHOICE_KEYS), log_kb=log_kb,
                  prev_b=(idx[1:] - 1 >= skip).float())


def pattern_stats(run: AttentionRun, *, compiled: bool | None = None,
                  device: str | torch.device | None = None) -> dict[str, np.ndarray]:
    """The (L, H) statistics of `docs/head-metrics.md`, section 1 (the head table's columns, and
    `in_segment`: the worst row's mass inside its own segment). `compiled`: one compiled pass per head
    (head_kernels.py, the CPU's way), or tensor operations on all heads at once in chunks (any
    device's way); None picks the first on the CPU. Both agree within float32 rounding and give
    the same pattern classes. `device`: where to compute (default the CPU)."""
    on_cpu = device is None or torch.device(device).type == "cpu"
    if on_cpu if compiled is None else compiled:
        return _compiled(run)
    flat = on_device(run.attentions.reshape(run.num_layers * run.num_heads, run.n, run.n), device)
    return _batched(run, _setup(run).to(flat.device), flat)


def _compiled(run: AttentionRun) -> dict[str, np.ndarray]:
    """`pattern_stats` by head_kernels' pass, threads over heads (the detector scores too)."""
    L, H, n = run.num_layers, run.num_heads, run.n
    att = np.ascontiguousarray(run.attentions.reshape(L * H, n, n), dtype=np.float32)
    targets = _target_pairs(run)
    sums = pattern_sums(att, run.is_causal, *key_masks(run.tokens, run.special_mask), segments(run.special_mask),
                        list(targets.values()), thread_count(), skip=int(first_is_sink(run)))
    sums[~np.isfinite(sums[:, TOTAL])] = np.nan  # a head with NaN or inf in it: no statistics
    out = {name: sums[:, i].reshape(L, H) for i, name in enumerate(SUMS) if i != TOTAL}
    total = sums[:, TOTAL]
    for k, name in enumerate(targets):
        hit = sums[:, TARGETS + k]
        out[name] = np.divide(hit, total, out=np.zeros_like(hit), where=total > 0).reshape(L, H)
    return {name: out[name] for name in STAT_NAMES}


def _batched(run: AttentionRun, s: _Setup, flat: torch.Tensor) -> dict[str, np.ndarray]:
    """All heads at once, in chunks of heads whose (chunk, n, n) float32 temporaries stay within
    CHUNK_BYTES, as tensor operations on a leading head axis."""
    L, H, n = run.num_layers, run.num_heads, run.n
    step = max(1, CHUNK_BYTES // (4 * n * n))
    parts = [_chunk_stats(flat[h0:h0 + step], s, n) for h0 in range(0, L * H, step)]
    return {name: torch.cat([p[name] for p in parts]).double().cpu().numpy().reshape(L, H) for name in STAT_NAMES}


def _chunk_stats(A: torch.Tensor, s: _Setup, n: int) -> dict[str, torch.Tensor]:
    """The statistics of a (B, n, n) chunk of heads, each a (B,) tensor."""
    B = A.shape[0]
    smooth = torch.add(s.floor, A, alpha=1 - ENTROPY_SMOOTHING).clamp_min_(1e-30)
    row_ent = -smooth.log().mul_(smooth).sum(-1, dtype=torch.float64)  # (B, n)
    del smooth
    per_row = A @ s.columns  # (B, n, 3): [SEP]-like, punctuation and all the row's mass
    sums = per_row.sum(1, dtype=torch.float64)  # (B, 3)
    total = sums[:, 2]
    values = {
        "entropy": row_ent.mean(-1),
        "norm_entropy": ((row_ent[:, s.rows] / s.log_k).mean(-1) if bool(s.rows.any())
                         else torch.full((B,), float("nan"), dtype=torch.float64, device=A.device)),
        "confidence": A.amax(-1).sum(-1, dtype=torch.float64) / n,
        # float64: a float32 product of all heads rounds ~4× worse than the compiled pass
        "distance": (A.reshape(B, -1).double() @ s.dist.double()) / n,
        "self": torch.diagonal(A, 0, 1, 2).sum(-1, dtype=torch.float64) / n,
        "prev": torch.diagonal(A, -1, 1, 2).sum(-1, dtype=torch.float64) / n,
        "next": torch.diagonal(A, 1, 1, 2).sum(-1, dtype=torch.float64) / n,
        "first": A[:, :, 0].sum(-1, dtype=torch.float64) / n,
        "sep": sums[:, 0] / n, "punct": sums[:, 1] / n,
    }
    values.update(_beyond(A, s, per_row[..., 2], n))
    safe = torch.where(total > 0, total, torch.ones(()))
    for name, (ii, jj) in s.targets.items():
        hit = (A[:, ii, jj].sum(-1, dtype=torch.float64) if len(ii)
               else torch.zeros(B, dtype=torch.float64, device=A.device))
        values[name] = torch.where(total > 0, hit / safe, torch.zeros((), dtype=torch.float64))
    return values


def _beyond(A: torch.Tensor, s: _Setup, mass: torch.Tensor, n: int) -> dict[str, torch.Tensor]:
    """The sink mass and the measures beyond the sink of a (B, n, n) chunk, each (B,), as the compiled
    pass computes them; `mass` (B, n) each row's sum."""
    B, skip = A.shape[0], s.skip
    lost = torch.where(mass > 0, (1 - mass).clamp_min(0), torch.zeros(()))  # a learned sink's share
    on_first = A[:, :, 0] if skip else torch.zeros_like(mass)
    values = {"sink": (on_first + lost).sum(-1, dtype=torch.float64) / n}
    after = A[:, :, skip:]  # (B, n, n − skip): the keys beyond the sink
    beyond = after.sum(-1)  # (B, n) float32, as the compiled pass adds it
    kept = (beyond >= EMPTY_BELOW) & s.rows_b
    inv = torch.where(kept, 1 / torch.where(kept, beyond, torch.ones(())), torch.zeros(()))  # (B, n) float32
    rows = kept.sum(-1).double()
    rows = torch.where(rows > 0, rows, torch.full((), float("nan"), dtype=torch.float64))  # none: NaN
    smooth = torch.add(s.floor_b, after * inv[..., None], alpha=1 - ENTROPY_SMOOTHING).clamp_min_(1e-30)
    row_ent = -smooth.log().mul_(smooth).sum(-1, dtype=torch.float64)  # (B, n)
    del smooth
    wide = kept & torch.isfinite(s.log_kb)
    norm_rows = wide.sum(-1).double()
    values["beyond_norm_entropy"] = torch.where(
        norm_rows > 0, torch.where(wide, row_ent / s.log_kb, torch.zeros((), dtype=torch.float64)).sum(-1)
        / norm_rows.clamp_min(1), torch.full((), float("nan"), dtype=torch.float64))
    values["beyond_self"] = (torch.diagonal(A, 0, 1, 2) * inv).sum(-1, dtype=torch.float64) / rows
    values["beyond_prev"] = (torch.diagonal(A, -1, 1, 2) * inv[:, 1:] * s.prev_b).sum(-1, dtype=torch.float64) / rows
    values["beyond_next"] = (torch.diagonal(A, 1, 1, 2) * inv[:, :-1]).sum(-1, dtype=torch.float64) / rows
    marks = (after @ s.columns[skip:, :2]) * inv[..., None]  # (B, n, 2)
    values["beyond_sep"] = marks[..., 0].sum(-1, dtype=torch.float64) / rows
    values["beyond_punct"] = marks[..., 1].sum(-1, dtype=torch.float64) / rows
    if s.same is None:
        values["in_segment"] = torch.zeros(B, dtype=torch.float64, device=A.device)
    else:
        own = (after * s.same[:, skip:]).sum(-1) * inv  # (B, n)
        worst = torch.where(kept, own, torch.full((), float("inf"), device=A.device)).amin(-1).double()
        values["in_segment"] = torch.where(torch.isfinite(worst), worst, torch.zeros((), dtype=torch.float64))
    return values


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

