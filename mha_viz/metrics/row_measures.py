"""The head table's pattern measures (`docs/head-metrics.md`, section 1) as sums over query rows: what the
tokens tell the sums (`TextFacts`), the sums' names (`ROW_SUMS`) and the measures made from them
(`measures_from_sums`). The weighted measures are the records of `row_table` (a diagonal, a column, marked keys,
the distance, a match of token ids); the entropy, the confidence and the sink are the backends' own. A block of
query rows is added to the sums by one of two backends, which follow the same definitions: one compiled pass on the
CPU (`row_kernels.BlockSums`, its loop written from the table) and tensor operations on any device
(`row_stats.RowStats`). The head table reads a whole (n, n) matrix as blocks of rows; a long text's scan and a
derived run's summary hand their blocks over as they are made. The names below are the default table's;
`row_table.current()` gives the one in force.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz.metrics.row_table import TABLE, RowTable, current, shifted_ids

_T = TABLE
# The measures read off the attention alone (in the catalogue's order, `measures.METRICS`); the detector
# scores of TransformerLens' head detector; the sink mass and the measures beyond the sink
MEASURED = _T.measured
DETECTORS = _T.shares
BEYOND = _T.beyond_names
# The measures a block reduction gives, in the catalogue's order, then in_segment (the worst kept row's mass
# inside its own segment beyond the sink, for the block rule)
STAT_NAMES = _T.stat_names
# What the rows add up beyond the sink: the worst kept row's mass inside its segment (a minimum: it starts at
# inf), then sums over the rows (a row is kept when enough is left beyond the sink)
ROW_BEYOND = _T.row_beyond
# The sums over the rows, in the order the compiled pass writes them
ROW_SUMS = _T.row_sums


def token_keys(token_ids: list[int], tokens: list[str]) -> np.ndarray:
    """One integer per token for equality tests (the duplicate and induction detectors): the token
    ids when known, else the display text's."""
    if token_ids:
        return np.asarray(token_ids)
    _, inverse = np.unique(np.asarray(tokens, dtype=object).astype(str), return_inverse=True)
    return inverse


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
    or all n, how many leading keys are the sink (`skip`), one integer per token for the detectors, the keys each
    "keys" record of the table marks, each "match" record's ids shifted by its parameter (ids[j − m] at key j, −1
    before the text), and the segments. `table`: the row table they were made for."""

    n: int
    causal: bool
    skip: int  # 1: the first key is the sink; 0: the first token is hidden, and only a learned sink is left
    ids: np.ndarray  # (n,) int64 (`token_keys`)
    masks: np.ndarray  # (masks, n) float32 0/1, `RowTable.key_masks`' order
    matched: np.ndarray  # (matches, n) int64, `RowTable.matches`' order
    seg: np.ndarray | None  # (n,) int64 for a two-segment input, else None
    table: RowTable

    @classmethod
    def of(cls, tokens: list[str], token_ids: list[int], special: list[bool], *, causal: bool,
           skip: int = 1, table: RowTable | None = None) -> "TextFacts":
        table = table or current()
        ids = np.asarray(token_keys(token_ids, tokens), dtype=np.int64)
        seg = segments(special)
        matched = np.array([shifted_ids(ids, m) for m in table.matches], np.int64).reshape(len(table.matches), len(ids))
        return cls(len(ids), bool(causal), int(skip), ids, table.masks(tokens, special), matched,
                   None if seg is None else seg.astype(np.int64), table)

    def mask(self, name: str) -> np.ndarray:
        """(n,) float32 0/1: the keys the "keys" record `name` marks."""
        return self.masks[[r.name for r in self.table.key_masks].index(name)]

    @classmethod
    def of_run(cls, run) -> "TextFacts":
        """A run's (`AttentionRun`): its tokens, its causality and whether its first key is the sink."""
        return cls.of(run.tokens, run.token_ids, run.special_mask, causal=run.is_causal,
                      skip=int(first_is_sink(run)))


def measures_from_sums(sums: dict[str, np.ndarray], n: int, table: RowTable | None = None) -> dict[str, np.ndarray]:
    """The head table's pattern measures (the table's stat_names, (H,) float64 each) from its row_sums over all n
    rows: the means over the rows; the detector scores ("share" records) as shares of the whole attention;
    in_segment the worst kept row's beyond the sink (0 for one segment or no kept row); the measures beyond the
    sink as means over the rows kept (NaN with none). A head with NaN or infinity in its attention (its total is
    not finite) has no measures: NaN in each."""
    table = table or current()
    out = {name: sums[name] / n for name in ("entropy", "confidence", "sink")}
    out.update((r.name, sums[r.name] / n) for r in table if r.reads == "rows")
    total = sums["total"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["norm_entropy"] = np.where(sums["norm_rows"] > 0, sums["norm_entropy"] / sums["norm_rows"], np.nan)
        for name in table.shares:
            out[name] = np.where(total > 0, sums[name] / np.where(total > 0, total, 1.0), 0.0)
        rows = np.where(sums["beyond_rows"] > 0, sums["beyond_rows"], np.nan)
        for r in table.beyond:
            out[f"beyond_{r.name}"] = sums[f"beyond_{r.name}"] / rows
        out["beyond_norm_entropy"] = np.where(sums["beyond_norm_rows"] > 0,
                                              sums["beyond_norm_entropy"] / sums["beyond_norm_rows"], np.nan)
    out["in_segment"] = np.where(np.isfinite(sums["in_segment"]), sums["in_segment"], 0.0)
    broken = ~np.isfinite(np.asarray(total, dtype=np.float64))
    return {name: np.where(broken, np.nan, np.asarray(out[name], dtype=np.float64)) for name in table.stat_names}
