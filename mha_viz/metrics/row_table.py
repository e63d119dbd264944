"""The head table's weighted per-row measures as data (issue 87): one record each. Every one of them is, for each
query row t, a sum over its keys s of A[t, s] · w(t, s) for a weight w of one of a few kinds:

- "offset": the key at s = t + `param` (self 0, the previous token −1, the next +1);
- "column": the key s = `param` (the first token 0);
- "keys": the keys a mask of the text marks (`keys(tokens, special)` → (n,) bool: [SEP]-like tokens, punctuation);
- "distance": |t − s|;
- "match": the keys s with ids[s − `param`] = ids[t] and s − `param` < t (0: an earlier copy of t's token, the
  duplicate detector; 1: the token after one, the induction detector).

A record is read as the mean of its sum over the rows ("rows"), or as its share of the whole attention ("share":
TransformerLens' detector scores, Σ(A ⊙ P)/ΣA); with `beyond`, it is also measured beyond the sink (on each row
renormalised over the keys after the sink, `beyond_<name>`). The entropy, its normalised form, the confidence and
the sink are the backends' own (`BUILT_IN`).

`TABLE` holds the records in the head table's order. Each backend reads it: the tensors' (`row_stats.RowStats`), the
compiled pass (`row_kernels`, its loop written from the table), the sums' names (`row_measures`), the catalogue's
words (`measures.METRICS`) and docs/head-metrics.md's table (`docs_table`, checked by a test). Adding such a measure
is a record here (and its line in the docs' table); `using(table)` runs code under another table (a test's).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from mha_viz.text.readable import bare

KINDS = ("offset", "column", "keys", "distance", "match")
PUNCTUATION = frozenset({".", ","})


def separators(tokens: list[str], special: list[bool]) -> np.ndarray:
    """[SEP]-like keys: the special tokens after the first."""
    marked = np.asarray(special, dtype=bool)
    return marked & (np.arange(len(tokens)) > 0)


def punctuation(tokens: list[str], special: list[bool]) -> np.ndarray:
    """'.' and ',' ("␣," is a comma)."""
    return np.array([bare(t) in PUNCTUATION for t in tokens], dtype=bool)


@dataclass(frozen=True)
class RowMeasure:
    """One weighted measure: its name (the head table's column; its sum's), its weight (`kind`, `param` or `keys`),
    how it is read ("rows" or "share"), whether it is measured beyond the sink too, and what the UI and the docs say
    of it (label, formula, the readings of high and low values; `bounded`: it lies in 0..1 on any pattern)."""

    name: str
    kind: str
    label: str
    formula: str
    high: str
    low: str
    param: int = 0
    keys: Callable[[list[str], list[bool]], np.ndarray] | None = field(default=None, compare=False)
    reads: str = "rows"
    beyond: bool = False
    bounded: bool = True
    bounded_form: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind {self.kind!r} is not one of {KINDS}")
        if (self.kind == "keys") != (self.keys is not None):
            raise ValueError(f"{self.name}: a 'keys' measure, and only one, names its keys (keys=)")
        if self.kind == "match" and self.param < 0:
            raise ValueError(f"{self.name}: a 'match' reads keys j with tok_(j − m) = tok_i, m ≥ 0, not {self.param}")
        if self.beyond and self.kind not in ("offset", "keys"):
            raise ValueError(f"{self.name}: only an 'offset' or a 'keys' measure is measured beyond the sink")
        if self.reads not in ("rows", "share"):
            raise ValueError(f"{self.name}: reads 'rows' or 'share', not {self.reads!r}")


RECORDS = (
    RowMeasure("distance", "distance", "Mean distance", "mean_i Σ_j A_ij·|i − j|", "looks far away",
               "looks at itself or neighbours", bounded=False, bounded_form="distance_norm"),  # 0 .. n − 1
    RowMeasure("self", "offset", "Self", "mean_i A_i,i", "attends to itself", "ignores itself", param=0, beyond=True),
    RowMeasure("prev", "offset", "Previous token", "mean_i A_i,i−1", "attends to the previous token", "does not",
               param=-1, beyond=True),
    RowMeasure("next", "offset", "Next token", "mean_i A_i,i+1", "attends to the next token", "does not", param=1,
               beyond=True),
    RowMeasure("first", "column", "First token (sink)", "mean_i A_i,0", "parks attention on [CLS] / BOS", "does not",
               param=0),
    RowMeasure("sep", "keys", "[SEP] tokens", "mean_i Σ_{j ∈ SEP} A_ij", "parks attention on separators", "does not",
               keys=separators, beyond=True),
    RowMeasure("punct", "keys", "Punctuation", "mean_i Σ_{j ∈ {'.', ','}} A_ij", "attends to . and ,", "does not",
               keys=punctuation, beyond=True),
    RowMeasure("prev_token_score", "offset", "Previous-token score (detector form of prev)",
               "Σ(A ⊙ P)/ΣA,  P[i, i−1] = 1",
               "a previous-token head (TransformerLens detector; equals prev when every row sums to 1)", "not one",
               param=-1, reads="share"),
    RowMeasure("duplicate_score", "match", "Duplicate-token score", "Σ(A ⊙ P)/ΣA,  P[i, j] = 1 if tok_j = tok_i, j < i",
               "looks back at earlier copies of the same token", "does not", param=0, reads="share"),
    RowMeasure("induction_score", "match", "Induction score", "Σ(A ⊙ P)/ΣA,  P[i, j+1] = 1 if tok_j = tok_i, j < i",
               "looks at the token after an earlier copy (an induction head); a perfect one scores 0.5 on a sequence "
               "repeated twice", "not an induction head", param=1, reads="share"),
)

# the measures each backend computes itself: before the records, the entropy, its normalised form and the
# confidence; after them, the sink mass and the normalised entropy beyond the sink; last, in_segment (the worst kept
# row's mass inside its own segment beyond the sink, for the block rule)
BUILT_IN_FIRST = ("entropy", "norm_entropy", "confidence")
BUILT_IN_BEYOND = ("sink", "beyond_norm_entropy")
# the built-in sums: over the rows, then beyond the sink (in_segment a minimum, the others sums)
SUMS_FIRST = ("entropy", "norm_entropy", "norm_rows", "confidence", "total")
SUMS_BEYOND = ("in_segment", "sink", "beyond_norm_entropy", "beyond_norm_rows", "beyond_rows")


class RowTable:
    """The records, and the names every backend and table derives from them."""

    def __init__(self, records: tuple[RowMeasure, ...] = RECORDS) -> None:
        names = [r.name for r in records]
        if len(set(names)) != len(names):
            raise ValueError(f"two records share a name: {names}")
        self.records = tuple(records)
        self.beyond = tuple(r for r in self.records if r.beyond)
        rows = tuple(r.name for r in self.records if r.reads == "rows")
        self.shares = tuple(r.name for r in self.records if r.reads == "share")  # the detectors
        self.measured = (*BUILT_IN_FIRST, *rows)
        self.beyond_names = (*BUILT_IN_BEYOND, *(f"beyond_{r.name}" for r in self.beyond))
        self.stat_names = (*self.measured, *self.shares, *self.beyond_names, "in_segment")
        self.row_beyond = (*SUMS_BEYOND, *(f"beyond_{r.name}" for r in self.beyond))
        self.row_sums = (*SUMS_FIRST, *names, *self.row_beyond)
        self.key_masks = tuple(r for r in self.records if r.kind == "keys")
        self.matches = tuple(sorted({r.param for r in self.records if r.kind == "match"}))

    def __iter__(self) -> Iterator[RowMeasure]:
        return iter(self.records)

    def key(self) -> tuple:
        """What the compiled loop written from this table depends on: each record's name, kind, parameter and
        reading (a mask's function is read into the text's facts, not into the loop)."""
        return tuple((r.name, r.kind, r.param, r.beyond) for r in self.records)

    def masks(self, tokens: list[str], special: list[bool]) -> np.ndarray:
        """(masks, n) float32 0/1: each "keys" record's keys, in the table's order."""
        out = np.zeros((len(self.key_masks), len(tokens)), np.float32)
        for row, r in enumerate(self.key_masks):
            out[row] = np.asarray(r.keys(tokens, special), dtype=bool)
        return out


TABLE = RowTable()
_current = threading.local()


def current() -> RowTable:
    """The table in force on this thread: `TABLE`, or the one a `using` block gives."""
    return getattr(_current, "table", None) or TABLE


@contextmanager
def using(table: RowTable):
    """Within this block (on this thread), every backend and table reads `table` instead of `TABLE`."""
    before = getattr(_current, "table", None)
    _current.table = table
    try:
        yield table
    finally:
        _current.table = before


def shifted_ids(ids: np.ndarray, m: int) -> np.ndarray:
    """(n,) int64: at key j, the id m tokens before it, ids[j − m] (−1 before the text): what a "match" record with
    parameter m compares with the query's own id."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.full(len(ids), -1, dtype=np.int64)
    out[m:] = ids[:len(ids) - m] if m < len(ids) else []
    return out


def weights(record: RowMeasure, first: int, rows: int, ids: np.ndarray) -> np.ndarray:
    """(rows, n): the record's weight w(t, s) for the query rows first … first + rows − 1 over the n keys of a text
    whose tokens are `ids` (one integer each), as a dense array (bool where w is 0 or 1, float64 for the distance):
    what a reader of a pattern other than the heads' own (a hybrid's effective attention, `mixing_measures`) weighs
    its rows by. Not for a "keys" record, whose keys need the text's tokens."""
    n = len(ids)
    t = np.arange(first, first + rows)[:, None]
    s = np.arange(n)[None, :]
    if record.kind == "offset":
        return s == t + record.param
    if record.kind == "column":
        return np.broadcast_to(s == record.param, (rows, n))
    if record.kind == "distance":
        return np.abs(t - s).astype(np.float64)
    if record.kind == "match":
        m = record.param
        own = np.asarray(ids, dtype=np.int64)[first:first + rows, None]
        return (shifted_ids(ids, m)[None, :] == own) & (s - m < t) & (s >= m)
    raise ValueError(f"{record.name}: a 'keys' measure needs the text's tokens")


KIND_WORDS = {"offset": "the key at i + {param}", "column": "key {param}", "keys": "the keys {name} marks",
              "distance": "|i − j|", "match": "keys j with tok_(j − {param}) = tok_i, j − {param} < i"}


def docs_table(table: RowTable | None = None) -> str:
    """The Markdown table of docs/head-metrics.md's weighted measures, written from the records."""
    lines = ["| Measure | Column | Weight w(i, j) | Read as | Beyond the sink |", "|---|---|---|---|---|"]
    for r in table or TABLE:
        weight = KIND_WORDS[r.kind].format(param=r.param, name=r.name)
        read = "mean over rows" if r.reads == "rows" else "share of all attention"
        lines.append(f"| {r.label} | `{r.name}` | {r.kind}: {weight} | {read} | {'yes' if r.beyond else 'no'} |")
    return "\n".join(lines)
