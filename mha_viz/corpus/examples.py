"""What makes each head fire across a corpus (issue 31, after HeadVis): per head, the documents it
attends to most strongly, samples from every score decile, the histogram of scores, the
attention-weighted histogram of query–key distances and the tokens that carry its attention — in
sums and bounded heaps that merge (`ExamplesPartial.merge`), so that batches, Ray actors and a whole
corpus combine to the same result in any grouping, with memory fixed by the options, not by the
number of documents.

A document's **score** for a head (docs/head-metrics.md, "Head examples"): the first query row and
the first key column are left out (the first token's sink would otherwise win every time;
`skip="special"` leaves out every special token's row and column as well), and so is every row
that sees fewer than MIN_KEYS of the keys left (in a causal model the first rows: the second token
sees only itself there, and its weight on itself would win by construction). A row's score is its
largest weight on a kept key; the document's is the mean of its TOP_ROWS best rows' scores, so
that one row does not decide it (and it reaches 1 only when TOP_ROWS rows each put all their
weight on one kept key). A document with fewer than TOP_ROWS such rows gives the head no score.
The **query** of a (document, head) is its best row (the earliest on ties): where it fires most.

- **top**: the `top` best (score, document index, query) triples, best first; equal scores keep the
  earlier document.
- **deciles**: the score range [0, 1] in ten equal parts (0–0.1, …, 0.9–1), `per_decile` documents
  sampled from each, uniformly without replacement: each (document, head) gets a fixed
  pseudo-random priority and each decile keeps the smallest. Value deciles, not HeadVis's quantile
  deciles: those need their boundaries before the first document (a warm-up pass) and cannot be
  merged exactly.
- **histogram**: SCORE_BINS equal bins of the score over [0, 1].
- **distances**: attention mass by |query − key| in log-spaced bins (0, 1, 2–3, 4–7, …), over the
  kept rows and columns (every row past the first, however few keys it sees).
- **tokens**: each token id's attention mass as a key (what it receives) and as a query (what its
  row gives to the kept keys), summed over the corpus; `HeadExamples.top_tokens` gives the best.
- **patterns**: for every document kept by a head, that head's attention as at most PATTERN_KEYS
  keys per query row with weights ≥ PATTERN_MIN, and the document's tokens: enough to redraw it
  without the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SCORE_BINS = 50
DECILES = 10
DISTANCE_BINS = 17  # d = 0, 1, 2–3, …, 2^14–2^15−1 and beyond
PATTERN_KEYS, PATTERN_MIN = 8, 0.005
SKIPS = ("first", "special")
MIN_KEYS = 4  # a counted row sees at least this many kept keys: with one its weight is 1 − sink, with two ≥ half of it
TOP_ROWS = 3  # a document's score: the mean of its best rows' scores
EMPTY_DOC = np.iinfo(np.int64).max
EMPTY_PRIORITY = np.iinfo(np.uint64).max


@dataclass(frozen=True)
class ExampleOptions:
    top: int = 10
    per_decile: int = 3
    skip: str = "first"  # "first": row and column 0; "special": those and every special token's

    def __post_init__(self) -> None:
        if self.top < 1 or self.per_decile < 0:
            raise ValueError(f"top must be at least 1 and per_decile at least 0; got {self.top}, {self.per_decile}")
        if self.skip not in SKIPS:
            raise ValueError(f"skip must be one of {', '.join(SKIPS)}; got {self.skip!r}")


def distance_bin(d: np.ndarray) -> np.ndarray:
    """The log-spaced bin of each distance: 0 → 0, 1 → 1, 2–3 → 2, 4–7 → 3, …"""
    d = np.asarray(d, dtype=np.int64)
    bins = np.zeros(d.shape, dtype=np.int64)
    pos = d > 0
    bins[pos] = np.floor(np.log2(d[pos])).astype(np.int64) + 1
    return np.minimum(bins, DISTANCE_BINS - 1)


def distance_labels() -> list[str]:
    labels = ["0", "1"]
    for b in range(2, DISTANCE_BINS):
        lo, hi = 2 ** (b - 1), 2 ** b - 1
        labels.append(f"{lo}–{hi}" if b < DISTANCE_BINS - 1 else f"≥{lo}")
    return labels


def priority(docs: np.ndarray, layer: np.ndarray, head: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random uint64 per (document, layer, head) (SplitMix64 of the three): the
    same wherever and in whatever order a document is seen."""
    with np.errstate(over="ignore"):
        x = (np.asarray(docs, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             + np.asarray(layer, dtype=np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
             + np.asarray(head, dtype=np.uint64) * np.uint64(0x94D049BB133111EB) + np.uint64(1))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def kept_mask(n: int, special: list[bool], skip: str) -> np.ndarray:
    """(n,) bool: the rows (and columns) that count."""
    keep = np.ones(n, dtype=bool)
    keep[:1] = False
    if skip == "special":
        keep &= ~np.asarray(special[:n], dtype=bool)
    return keep


def scored_rows(keep: np.ndarray, causal: bool) -> np.ndarray:
    """(n,) bool: the kept rows that see at least MIN_KEYS kept keys (a causal row sees the keys up
    to itself, an encoder's every key)."""
    keep = np.asarray(keep, dtype=bool)
    seen = np.cumsum(keep) if causal else np.full(keep.size, keep.sum())
    return keep & (seen >= MIN_KEYS)


def document_scores(row_scores: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(…, n) row scores and the (n,) rows that count -> each head's document score (the mean of
    its TOP_ROWS best counted rows; NaN with fewer rows) and its best counted row (-1 then)."""
    counted = np.flatnonzero(rows)
    if counted.size < TOP_ROWS:
        return np.full(row_scores.shape[:-1], np.nan), np.full(row_scores.shape[:-1], -1, dtype=np.int64)
    r = row_scores[..., counted]
    best = -np.partition(-r, TOP_ROWS - 1, axis=-1)[..., :TOP_ROWS]
    return best.mean(-1, dtype=np.float64), counted[np.argmax(r, axis=-1)]


def sparse_pattern(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Attention (…, n, n) as each row's PATTERN_KEYS largest weights at least PATTERN_MIN:
    (keys (…, n, K) int16, -1 where none; weights (…, n, K) float16, 0 there)."""
    n = a.shape[-1]
    k = min(PATTERN_KEYS, n)
    keys = np.argpartition(-a, k - 1, axis=-1)[..., :k] if k < n else np.broadcast_to(np.arange(n), a.shape).copy()
    weights = np.take_along_axis(a, keys, -1)
    order = np.argsort(-weights, axis=-1, kind="stable")
    keys, weights = np.take_along_axis(keys, order, -1), np.take_along_axis(weights, order, -1)
    ok = weights >= PATTERN_MIN
    out_k = np.full((*a.shape[:-1], PATTERN_KEYS), -1, dtype=np.int16)
    out_w = np.zeros((*a.shape[:-1], PATTERN_KEYS), dtype=np.float16)
    out_k[..., :k] = np.where(ok, keys, -1)
    out_w[..., :k] = np.where(ok, weights, 0)
    return out_k, out_w


def _cells_by_bin(n: int, first_only: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat indices of the counted cells of an (n, n) pattern — past row and column 0 when
    `first_only`, else all — in distance-bin order; where each bin starts; the bins present)."""
    q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    flat = (q * n + k).ravel()
    if first_only:
        flat = flat[((q > 0) & (k > 0)).ravel()]
    bins = distance_bin(np.abs(flat // n - flat % n))
    order = np.argsort(bins, kind="stable")
    present, starts = np.unique(bins[order], return_index=True)
    return flat[order], starts, present


def _best(scores: np.ndarray, docs: np.ndarray, k: int, *carried: np.ndarray) -> tuple[np.ndarray, ...]:
    """The k best along the last axis: highest score first, the earlier document on ties; the
    `carried` arrays (the queries) follow their documents."""
    order = np.lexsort((docs, -scores), axis=-1)[..., :k]
    return tuple(np.take_along_axis(a, order, -1) for a in (scores, docs, *carried))


def _smallest(prio: np.ndarray, docs: np.ndarray, k: int, *carried: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.lexsort((docs, prio), axis=-1)[..., :k]
    return tuple(np.take_along_axis(a, order, -1) for a in (prio, docs, *carried))


def _union_add(ids_a: np.ndarray, mass_a: np.ndarray, ids_b: np.ndarray, mass_b: np.ndarray):
    """Token masses (rows, len(ids)) over two id sets, added over their union."""
    ids = np.union1d(ids_a, ids_b)
    out = np.zeros((max(mass_a.shape[0], mass_b.shape[0]), ids.size))
    if ids_a.size:
        out[:, np.searchsorted(ids, ids_a)] += mass_a
    if ids_b.size:
        out[:, np.searchsorted(ids, ids_b)] += mass_b
    return ids, out


@dataclass
class ExamplesPartial:
    """What some documents add up to, for an (L, H) model; `merge` combines two."""

    num_layers: int
    num_heads: int
    options: ExampleOptions
    top_score: np.ndarray = None  # (L, H, top) float64, -inf where empty
    top_doc: np.ndarray = None  # (L, H, top) int64
    top_query: np.ndarray = None  # (L, H, top) int64: the document's best counted row, -1 where empty
    dec_priority: np.ndarray = None  # (L, H, DECILES, per_decile) uint64, max where empty
    dec_doc: np.ndarray = None
    dec_score: np.ndarray = None
    dec_query: np.ndarray = None
    histogram: np.ndarray = None  # (L, H, SCORE_BINS) int64
    distances: np.ndarray = None  # (L, H, DISTANCE_BINS) float64
    key_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    key_mass: np.ndarray = None  # (L·H, len(key_ids))
    query_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    query_mass: np.ndarray = None
    vocab: dict = field(default_factory=dict)  # token id -> its display text
    documents: dict = field(default_factory=dict)  # doc -> its display tokens (kept documents only)
    patterns: dict = field(default_factory=dict)  # (doc, layer, head) -> (keys (n, K) int16, weights (n, K) float16)

    def __post_init__(self) -> None:
        L, H, o = self.num_layers, self.num_heads, self.options
        if self.top_score is None:
            self.top_score = np.full((L, H, o.top), -np.inf)
            self.top_doc = np.full((L, H, o.top), EMPTY_DOC, dtype=np.int64)
            self.top_query = np.full((L, H, o.top), -1, dtype=np.int64)
            self.dec_priority = np.full((L, H, DECILES, o.per_decile), EMPTY_PRIORITY, dtype=np.uint64)
            self.dec_doc = np.full((L, H, DECILES, o.per_decile), EMPTY_DOC, dtype=np.int64)
            self.dec_score = np.full((L, H, DECILES, o.per_decile), np.nan)
            self.dec_query = np.full((L, H, DECILES, o.per_decile), -1, dtype=np.int64)
            self.histogram = np.zeros((L, H, SCORE_BINS), dtype=np.int64)
            self.distances = np.zeros((L, H, DISTANCE_BINS))
            self.key_mass = np.zeros((L * H, 0))
            self.query_mass = np.zeros((L * H, 0))

    def add_runs(self, runs, docs) -> None:
        """Add documents: their `AttentionRun`s and their indices in the corpus."""
        L, H, o = self.num_layers, self.num_heads, self.options
        scores = np.full((L, H, len(runs)), -np.inf)
        queries = np.full((L, H, len(runs)), -1, dtype=np.int64)
        kept_docs = np.asarray(list(docs), dtype=np.int64)
        by_bin: dict[tuple[int, bool], tuple] = {}  # (n, first only) -> the cells in bin order, bins' starts
        ids, key_mass, query_mass = [], [], []
        for i, run in enumerate(runs):
            n = run.n
            keep = kept_mask(n, run.special_mask, o.skip)
            first_only = bool(keep[1:].all())  # HeadVis's case: read the attention itself, no masked copy
            if (n, first_only) not in by_bin:
                by_bin[(n, first_only)] = _cells_by_bin(n, first_only)
            order, starts, present = by_bin[(n, first_only)]
            a = run.attentions  # (L, H, n, n)
            row_scores = np.zeros((L, H, n), dtype=a.dtype)
            if first_only:
                inner = a[:, :, 1:, 1:]  # a view
                given, received = inner.sum(3), inner.sum(2)  # (L, H, n − 1): from each query, to each key
                key_mass.append(np.concatenate([np.zeros((L, H, 1)), received], 2).reshape(L * H, n))
                query_mass.append(np.concatenate([np.zeros((L, H, 1)), given], 2).reshape(L * H, n))
                cells = a.reshape(L * H, -1)[:, order]  # the counted cells, in distance-bin order
                if n > 1:
                    row_scores[:, :, 1:] = inner.max(3)
            else:
                masked = a * (keep[:, None] & keep[None, :])
                key_mass.append(masked.sum(2).reshape(L * H, n))
                query_mass.append(masked.sum(3).reshape(L * H, n))
                cells = masked.reshape(L * H, -1)[:, order]
                row_scores = masked.max(3)
            doc_score, query = document_scores(row_scores, scored_rows(keep, run.is_causal))
            scores[:, :, i] = np.where(np.isnan(doc_score), -np.inf, doc_score)
            queries[:, :, i] = query
            if keep.any() and cells.shape[1]:
                # sums by bin without BLAS, whose threads would spin beside torch's on a small machine
                self.distances[:, :, present] += np.add.reduceat(cells, starts, axis=1).reshape(L, H, -1)
            ids.append(np.asarray(run.token_ids[:n], dtype=np.int64))
            for t, text in zip(ids[-1].tolist(), run.tokens):
                self.vocab.setdefault(t, text)
        if ids:  # the batch's tokens summed by id once, then added to the running total
            u, inverse = np.unique(np.concatenate(ids), return_inverse=True)
            for side, masses in (("key", key_mass), ("query", query_mass)):
                summed = np.zeros((L * H, u.size))
                np.add.at(summed.T, inverse, np.concatenate(masses, axis=1).T)
                old_ids, old_mass = getattr(self, f"{side}_ids"), getattr(self, f"{side}_mass")
                new_ids, new_mass = _union_add(old_ids, old_mass, u, summed)
                setattr(self, f"{side}_ids", new_ids)
                setattr(self, f"{side}_mass", new_mass)
        scored = np.isfinite(scores)
        layer, head, col = np.nonzero(scored)
        bins = np.minimum((scores[layer, head, col] * SCORE_BINS).astype(np.int64), SCORE_BINS - 1)
        np.add.at(self.histogram, (layer, head, bins), 1)
        docs_b = np.broadcast_to(kept_docs, scores.shape)
        self.top_score, self.top_doc, self.top_query = _best(
            np.concatenate([self.top_score, scores], -1),
            np.concatenate([self.top_doc, np.where(scored, docs_b, EMPTY_DOC)], -1), o.top,
            np.concatenate([self.top_query, queries], -1))
        self._add_deciles(layer, head, col, kept_docs, scores[layer, head, col], queries[layer, head, col])
        for run, doc in zip(runs, kept_docs.tolist()):  # each (document, head) kept now keeps its pattern
            held = np.nonzero(self._holds(doc))
            if not held[0].size:
                continue
            self.documents[doc] = list(run.tokens)
            keys, weights = sparse_pattern(run.attentions[held])  # (kept heads, n, K): one call a document
            for j, (layer, h) in enumerate(zip(*held)):
                self.patterns[(doc, int(layer), int(h))] = (keys[j], weights[j])
        self._prune()

    def _add_deciles(self, layer, head, col, docs, scores, queries) -> None:
        """Offer each scored (layer, head, document col of `docs`) to its decile's sample."""
        o = self.options
        if o.per_decile == 0 or col.size == 0:
            return
        L, H = self.num_layers, self.num_heads
        decile = np.minimum((scores * DECILES).astype(np.int64), DECILES - 1)
        prio = np.full((L, H, DECILES, docs.size), EMPTY_PRIORITY, dtype=np.uint64)  # a column a document
        dd = np.full(prio.shape, EMPTY_DOC, dtype=np.int64)
        ss = np.full(prio.shape, np.nan)
        qq = np.full(prio.shape, -1, dtype=np.int64)
        prio[layer, head, decile, col] = priority(docs[col], layer, head)
        dd[layer, head, decile, col], ss[layer, head, decile, col] = docs[col], scores
        qq[layer, head, decile, col] = queries
        self.dec_priority, self.dec_doc, self.dec_score, self.dec_query = _smallest(
            np.concatenate([self.dec_priority, prio], -1), np.concatenate([self.dec_doc, dd], -1), o.per_decile,
            np.concatenate([self.dec_score, ss], -1), np.concatenate([self.dec_query, qq], -1))

    def _holds(self, doc: int) -> np.ndarray:
        """(L, H) bool: the heads that keep document `doc` (top or a decile sample)."""
        return (self.top_doc == doc).any(-1) | (self.dec_doc == doc).any((-1, -2))

    def _prune(self) -> None:
        """Forget the patterns and documents no head keeps any more (memory stays bounded)."""
        kept = set(zip(*[a.tolist() for a in kept_triples(self)]))
        self.patterns = {k: v for k, v in self.patterns.items() if k in kept}
        docs = {d for d, _, _ in self.patterns}
        self.documents = {d: t for d, t in self.documents.items() if d in docs}

    def merge(self, other: "ExamplesPartial") -> "ExamplesPartial":
        """Both partials combined (a new one; neither changes): the result of adding their documents
        in one pass, whatever the grouping."""
        if (self.num_layers, self.num_heads, self.options) != (other.num_layers, other.num_heads, other.options):
            raise ValueError("cannot merge examples of different shapes or options")
        out = ExamplesPartial(self.num_layers, self.num_heads, self.options)
        def both(name: str) -> np.ndarray:
            return np.concatenate([getattr(self, name), getattr(other, name)], -1)

        out.top_score, out.top_doc, out.top_query = _best(both("top_score"), both("top_doc"), self.options.top,
                                                          both("top_query"))
        out.dec_priority, out.dec_doc, out.dec_score, out.dec_query = _smallest(
            both("dec_priority"), both("dec_doc"), self.options.per_decile, both("dec_score"), both("dec_query"))
        out.histogram = self.histogram + other.histogram
        out.distances = self.distances + other.distances
        out.key_ids, out.key_mass = _union_add(self.key_ids, self.key_mass, other.key_ids, other.key_mass)
        out.query_ids, out.query_mass = _union_add(self.query_ids, self.query_mass, other.query_ids, other.query_mass)
        out.vocab = {**other.vocab, **self.vocab}
        out.documents = {**other.documents, **self.documents}
        out.patterns = {**other.patterns, **self.patterns}
        out._prune()
        return out


def kept_triples(part) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(docs, layers, heads) of every kept (document, head)."""
    top = part.top_doc != EMPTY_DOC
    dec = part.dec_doc != EMPTY_DOC
    l1, h1, _ = np.nonzero(top)
    l2, h2, _, _ = np.nonzero(dec)
    docs = np.concatenate([part.top_doc[top], part.dec_doc[dec]])
    return docs, np.concatenate([l1, l2]), np.concatenate([h1, h2])
