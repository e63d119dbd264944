"""The head table's pattern measures (`docs/head-metrics.md`, section 1) as sums over query rows: what the
tokens tell the sums (`TextFacts`), the sums' names (`ROW_SUMS`) and the measures made from them
(`measures_from_sums`). A block of query rows is added to the sums by one of two backends, which follow the
same definitions: one compiled pass on the CPU (`row_kernels.BlockSums`) and tensor operations on any device
(`row_stats.RowStats`). The head table reads a whole (n, n) matrix as blocks of rows; a long text's scan and a
derived run's summary hand their blocks over as they are made.

Adding a pattern measure: its `Measure` in `measures.METRICS`, its name in MEASURED (or BEYOND) and, when
it is not a mean over the rows of one sum, in `measures_from_sums`; its sum in each backend
(`row_kernels._rows`, `row_stats.RowStats.add`) under a name of ROW_SUMS; and a hand computation of it in
tests/unit/test_row_measures.py, which checks both backends against it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz.metrics.measures import PUNCTUATION
from mha_viz.text.readable import bare

# The measures read off the attention alone (in the catalogue's order, `measures.METRICS`); the detector
# scores of TransformerLens' head detector; the sink mass and the measures beyond the sink
MEASURED = ("entropy", "norm_entropy", "confidence", "distance", "self", "prev", "next", "first", "sep", "punct")
DETECTORS = ("prev_token_score", "duplicate_score", "induction_score")
BEYOND = ("sink", "beyond_norm_entropy", "beyond_self", "beyond_prev", "beyond_next", "beyond_sep", "beyond_punct")
# The measures a block reduction gives, in the catalogue's order, then in_segment (the worst kept row's mass
# inside its own segment beyond the sink, for the block rule)
STAT_NAMES = (*MEASURED, *DETECTORS, *BEYOND, "in_segment")
# What the rows add up beyond the sink: the worst kept row's mass inside its segment (a minimum: it starts at
# inf), then sums over the rows (a row is kept when enough is left beyond the sink)
ROW_BEYOND = ("in_segment", "sink", "beyond_norm_entropy", "beyond_norm_rows", "beyond_self", "beyond_prev",
              "beyond_next", "beyond_sep", "beyond_punct", "beyond_rows")
# The sums over the rows, in the order the compiled pass writes them
ROW_SUMS = ("entropy", "norm_entropy", "norm_rows", "confidence", "distance", "self", "prev", "next", "first",
            "sep", "punct", "total", "duplicate_score", "induction_score", *ROW_BEYOND)


def token_keys(token_ids: list[int], tokens: list[str]) -> np.ndarray:
    """One integer per token for equality tests (the duplicate and induction detectors): the token
    ids when known, else the display text's."""
    if token_ids:
        return np.asarray(token_ids)
    _, inverse = np.unique(np.asarray(tokens, dtype=object).astype(str), return_inverse=True)
    return inverse


def key_masks(tokens: list[str], special_mask: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """(n,) float32 0/1 masks of the keys: [SEP]-like tokens after the first, and punctuation."""
    special = np.asarray(special_mask, dtype=bool)
    sep = special & (np.arange(len(tokens)) > 0)
    punct = np.array([bare(t) in PUNCTUATION for t in tokens], dtype=bool)  # "␣," is a comma
    return sep.astype(np.float32), punct.astype(np.float32)


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


def first_is_sink(run) -> bool:
    """Whether the run's first key is its sink: its first token is the text's first (not hidden by
    `drop_tokens`; a run with the first token hidden has no sink left but a learned one)."""
    return run.n > 0 and (run.hidden is None or int(run.hidden.kept[0]) == 0)


@dataclass(frozen=True)
class TextFacts:
    """What the sums read off an n-token text rather than its heads: whether row i sees keys 0 … i (causal)
    or all n, how many leading keys are the sink (`skip`), one integer per token for the detectors and the
    previous token's (the induction target's), the [SEP]-like and punctuation keys, and the segments."""

    n: int
    causal: bool
    skip: int  # 1: the first key is the sink; 0: the first token is hidden, and only a learned sink is left
    ids: np.ndarray  # (n,) int64 (`token_keys`)
    before: np.ndarray  # (n,) int64: the previous token's id, −1 for the first
    sep: np.ndarray  # (n,) float32 0/1
    punct: np.ndarray  # (n,) float32 0/1
    seg: np.ndarray | None  # (n,) int64 for a two-segment input, else None

    @classmethod
    def of(cls, tokens: list[str], token_ids: list[int], special: list[bool], *, causal: bool,
           skip: int = 1) -> "TextFacts":
        ids = np.asarray(token_keys(token_ids, tokens), dtype=np.int64)
        sep, punct = key_masks(tokens, special)
        seg = segments(special)
        return cls(len(tokens), bool(causal), int(skip), ids, np.concatenate([[-1], ids[:-1]]).astype(np.int64),
                   sep, punct, None if seg is None else seg.astype(np.int64))

    @classmethod
    def of_run(cls, run) -> "TextFacts":
        """A run's (`AttentionRun`): its tokens, its causality and whether its first key is the sink."""
        return cls.of(run.tokens, run.token_ids, run.special_mask, causal=run.is_causal,
                      skip=int(first_is_sink(run)))


def measures_from_sums(sums: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """The head table's pattern measures (STAT_NAMES, (H,) float64 each) from the ROW_SUMS of all n rows: the
    means over the rows; the detector scores as shares of the whole attention (the previous-token target is
    the prev diagonal); in_segment the worst kept row's beyond the sink (0 for one segment or no kept row);
    the measures beyond the sink as means over the rows kept (NaN with none). A head with NaN or infinity
    in its attention (its total is not finite) has no measures: NaN in each."""
    out = {name: sums[name] / n for name in ("entropy", "confidence", "distance", "self", "prev", "next", "first",
                                             "sep", "punct", "sink")}
    with np.errstate(invalid="ignore", divide="ignore"):
        out["norm_entropy"] = np.where(sums["norm_rows"] > 0, sums["norm_entropy"] / sums["norm_rows"], np.nan)
        total = sums["total"]
        for name, hit in (("prev_token_score", "prev"), ("duplicate_score", "duplicate_score"),
                          ("induction_score", "induction_score")):
            out[name] = np.where(total > 0, sums[hit] / np.where(total > 0, total, 1.0), 0.0)
        rows = np.where(sums["beyond_rows"] > 0, sums["beyond_rows"], np.nan)
        for name in ("beyond_self", "beyond_prev", "beyond_next", "beyond_sep", "beyond_punct"):
            out[name] = sums[name] / rows
        out["beyond_norm_entropy"] = np.where(sums["beyond_norm_rows"] > 0,
                                              sums["beyond_norm_entropy"] / sums["beyond_norm_rows"], np.nan)
    out["in_segment"] = np.where(np.isfinite(sums["in_segment"]), sums["in_segment"], 0.0)
    broken = ~np.isfinite(np.asarray(total, dtype=np.float64))
    return {name: np.where(broken, np.nan, np.asarray(out[name], dtype=np.float64)) for name in STAT_NAMES}
