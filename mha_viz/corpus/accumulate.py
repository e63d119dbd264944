"""Per-head sums over documents (`Partial`): what one batch, one Ray actor or a whole corpus
adds up, in plain numpy so that it pickles and merges anywhere.

Every document weighs the same (Clark et al.): each document's `metrics.head_table` row is added
as it is, whatever its length. A `Partial` holds, per numeric column of the head table, the
(L, H) sum and sum of squares over documents (and how many documents gave a finite value: a
one-token document has no normalised entropy), per pattern class an (L, H) count, the
(L·H, L·H) sum of pattern cosines and the summed importance. `merge` adds two of them;
`finish` turns one into a `CorpusStats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mha_viz import metrics
from mha_viz.circuits.composition import table_weights
from mha_viz.corpus import importance as corpus_importance
from mha_viz.corpus.batching import capture_runs
from mha_viz.corpus.examples import ExampleOptions, ExamplesPartial
from mha_viz.corpus.examples_result import HeadExamples
from mha_viz.corpus.stats import CorpusStats
from mha_viz.metrics import Weights
from mha_viz.metrics.measures import PATTERN_CLASSES
from mha_viz_models import LoadedModel

# Ties in the majority vote go to the first of these (the most specific label first); a class
# not listed here sorts after them, alphabetically.
PATTERN_ORDER = PATTERN_CLASSES
KEYS = ("layer", "head", "pattern")  # head table columns that are not statistics


def pattern_class(label: str) -> str:
    """The class of a head-table pattern label: "diagonal:prev" -> "diagonal"."""
    return label.split(":", 1)[0]


@dataclass
class Partial:
    """Sums over `n_docs` documents of `n_tokens` tokens in all, for an (L, H) model."""

    num_layers: int
    num_heads: int
    n_docs: int = 0
    n_tokens: int = 0
    sums: dict[str, np.ndarray] = field(default_factory=dict)  # column -> (L, H) Σ_d x_d
    squares: dict[str, np.ndarray] = field(default_factory=dict)  # column -> (L, H) Σ_d x_d²
    counts: dict[str, np.ndarray] = field(default_factory=dict)  # column -> (L, H) documents with a finite x_d
    patterns: dict[str, np.ndarray] = field(default_factory=dict)  # class -> (L, H) documents with that class
    similarity_sum: np.ndarray | None = None  # (L·H, L·H) Σ_d pattern cosine
    importance_sum: np.ndarray | None = None  # (L, H) Σ_d importance before normalisation
    importance_note: str = ""  # why importance_sum is None (when n_docs > 0)
    model_name: str = ""
    examples: ExamplesPartial | None = None  # each head's examples (`corpus.examples`), when asked for
    lengths: np.ndarray | None = None  # (longest + 1,) documents by token count (`CorpusStats.lengths`)

    @classmethod
    def empty(cls, num_layers: int, num_heads: int, model_name: str = "") -> "Partial":
        """Nothing added yet: the neutral element of `merge`."""
        return cls(num_layers, num_heads, model_name=model_name)

    @property
    def shape(self) -> tuple[int, int]:
        return self.num_layers, self.num_heads

    def add(self, table: pd.DataFrame, similarity: np.ndarray, n_tokens: int) -> None:
        """Add one document: its head table (rows in layer-major order) and pattern cosines."""
        self.add_many([table], [similarity], [n_tokens])

    def add_many(self, tables: Sequence, similarities: Sequence[np.ndarray], n_tokens: Sequence[int]) -> None:
        """Add documents, each with its head table (a DataFrame, or `metrics.head_columns`'s dict:
        building a DataFrame a document would cost as much as the statistics), pattern cosines
        and token count, in one numpy pass over the batch."""
        if not tables:
            return
        L, H = self.shape
        tables = [{c: t[c].to_numpy() for c in t.columns} if isinstance(t, pd.DataFrame) else t for t in tables]
        names = [c for c, v in tables[0].items()
                 if c not in KEYS and np.asarray(v).dtype.kind in "fiub"]
        x = np.stack([np.column_stack([np.asarray(t[c], dtype=np.float64) for c in names])
                      for t in tables])  # (D, L·H, C)
        finite = np.isfinite(x)
        x = np.where(finite, x, 0.0)
        sums, squares, counts = x.sum(0), (x * x).sum(0), finite.sum(0)  # (L·H, C) each
        for j, name in enumerate(names):
            self.sums[name] = self.sums.get(name, 0.0) + sums[:, j].reshape(L, H)
            self.squares[name] = self.squares.get(name, 0.0) + squares[:, j].reshape(L, H)
            self.counts[name] = self.counts.get(name, 0) + counts[:, j].reshape(L, H).astype(np.int64)
        classes = np.array([[pattern_class(p) for p in t["pattern"]] for t in tables])  # (D, L·H)
        for label in np.unique(classes):
            self.patterns[label] = self.patterns.get(label, 0) + (classes == label).sum(0).reshape(L, H)
        sim = np.nan_to_num(np.asarray(similarities, dtype=np.float64)).sum(0)  # (L·H, L·H)
        self.similarity_sum = sim if self.similarity_sum is None else self.similarity_sum + sim
        self.n_docs += len(tables)
        self.n_tokens += int(sum(n_tokens))
        self.lengths = _add_array(self.lengths, np.bincount(np.asarray(n_tokens, dtype=np.int64)))

    def merge(self, other: "Partial") -> "Partial":
        """The sums of both (a new Partial; neither is changed). Associative and, up to float
        rounding, commutative. Raises ValueError for partials of different shapes or models."""
        if self.shape != other.shape:
            raise ValueError(f"cannot merge sums for {self.shape} heads with sums for {other.shape}")
        if self.model_name and other.model_name and self.model_name != other.model_name:
            raise ValueError(f"cannot merge sums of '{self.model_name}' with sums of '{other.model_name}'")
        if self.n_docs == 0 or other.n_docs == 0:  # the neutral element keeps the other's importance
            base = other if self.n_docs == 0 else self
            importance, note = base.importance_sum, base.importance_note
        elif self.importance_sum is None or other.importance_sum is None:
            importance = None
            note = self.importance_note if self.importance_sum is None else other.importance_note
        else:
            importance, note = self.importance_sum + other.importance_sum, ""
        return Partial(
            *self.shape, n_docs=self.n_docs + other.n_docs, n_tokens=self.n_tokens + other.n_tokens,
            sums=_add(self.sums, other.sums), squares=_add(self.squares, other.squares),
            counts=_add(self.counts, other.counts), patterns=_add(self.patterns, other.patterns),
            similarity_sum=_add_array(self.similarity_sum, other.similarity_sum),
            importance_sum=importance, importance_note=note, model_name=self.model_name or other.model_name,
            examples=_merge_examples(self.examples, other.examples),
            lengths=_add_array(self.lengths, other.lengths),
        )

    def finish(self, *, corpus_hash: str = "", max_tokens: int | None = None, seconds: float = 0.0) -> CorpusStats:
        """The corpus statistics: means, population stds and majority classes over documents,
        the mean pattern cosine and the importance with each layer's row L2-normalised."""
        if self.n_docs == 0:
            raise ValueError("no documents were added, so there are no statistics")
        L, H = self.shape
        layers, heads = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
        table = pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel()})
        stds = {}
        for name, total in self.sums.items():
            n = self.counts[name]
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(n > 0, total / n, np.nan)
                var = np.where(n > 0, self.squares[name] / n - mean * mean, np.nan)
                # E[x²] − mean² cancels: a value equal in every document leaves ~1e-16 · mean² of noise
                var = np.where(np.abs(var) <= 1e-12 * np.maximum(mean * mean, 1e-300), 0.0, var)
            table[name] = mean.ravel()
            stds[f"{name}_std"] = np.sqrt(np.clip(var, 0.0, None)).ravel()
        for name, values in stds.items():
            table[name] = values
        table["pattern"] = _majority(self.patterns, L, H)
        table["n_docs"] = self.n_docs
        importance, note = self.importance_sum, self.importance_note
        if importance is not None:
            norms = np.linalg.norm(importance, axis=1, keepdims=True)  # (L, 1)
            importance = np.divide(importance, norms, out=np.zeros_like(importance, dtype=np.float64),
                                   where=norms > 0)
        return CorpusStats(
            table=table, importance=importance, importance_note=note if importance is None else "",
            similarity=self.similarity_sum / self.n_docs, model_name=self.model_name, n_docs=self.n_docs,
            n_tokens=self.n_tokens, corpus_hash=corpus_hash, max_tokens=max_tokens, seconds=float(seconds),
            examples=None if self.examples is None else HeadExamples(self.examples, self.n_docs),
            lengths=self.lengths,
        )


def model_weights(model: LoadedModel) -> Weights | None:
    """The per-head weights the head table's output norms and copying scores need (`table_weights`), or None
    when the architecture does not expose them (those columns are then absent, as in the app)."""
    return table_weights(model)


def batch_partial(model: LoadedModel, texts: Sequence[str], *, max_tokens: int | None = 128,
                  importance: bool = True, weights: Weights | None = None, examples: ExampleOptions | None = None,
                  docs: Sequence[int] | None = None) -> Partial:
    """The sums over `texts`, run as one padded batch (plus, with `importance`, the batch's
    summed gradient importance or, when that cannot be computed, the reason; with `examples`,
    each head's examples, the texts being documents `docs` of the corpus)."""
    part = Partial.empty(model.num_layers, model.num_heads, model.name)
    runs = capture_runs(model, texts, max_tokens=max_tokens)
    if examples is not None:
        if docs is None or len(docs) != len(texts):
            raise ValueError("examples need each text's document index (docs)")
        part.examples = ExamplesPartial(model.num_layers, model.num_heads, examples)
        part.examples.add_runs(runs, docs)
    part.add_many([metrics.head_columns(r, weights) for r in runs],
                  [metrics.head_similarity(r, "cosine") for r in runs], [r.n for r in runs])
    del runs  # the batch's attentions: before the importance pass, which needs memory of its own
    if not importance:
        part.importance_note = "Importance was not computed: it was switched off for this job."
        return part
    try:
        part.importance_sum = np.asarray(
            corpus_importance.batch_importance(model, list(texts), max_tokens=max_tokens), dtype=np.float64)
    except corpus_importance.Unavailable as exc:
        part.importance_note = str(exc)
    return part


def _majority(patterns: dict[str, np.ndarray], L: int, H: int) -> list[str]:
    """Per head the class most documents gave; ties go to the first in PATTERN_ORDER."""
    order = [c for c in PATTERN_ORDER if c in patterns] + sorted(set(patterns) - set(PATTERN_ORDER))
    counts = np.stack([np.broadcast_to(patterns[c], (L, H)) for c in order])  # (C, L, H)
    winners = counts.argmax(0)  # argmax takes the first of equal counts
    return [order[i] for i in winners.ravel()]


def _merge_examples(a: ExamplesPartial | None, b: ExamplesPartial | None) -> ExamplesPartial | None:
    if a is None or b is None:
        return b if a is None else a
    return a.merge(b)


def _add(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}


def _add_array(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """a + b; None is nothing; a 1-D pair of different lengths (counts by token count) padded with 0."""
    if a is None or b is None:
        return b if a is None else a
    if a.ndim == 1 and a.shape != b.shape:
        a, b = (np.pad(x, (0, max(a.size, b.size) - x.size)) for x in (a, b))
    return a + b
