"""`HeadExamples`: what `corpus.head_examples` returns (see `corpus.examples` for what is kept and
why), read per head, and its two files beside the corpus statistics: `examples.npz` (every array,
the kept patterns flattened; read without unpickling) and `examples.json` (options, token texts,
the kept documents' tokens)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_viz.corpus.examples import (
    DECILES,
    EMPTY_DOC,
    PATTERN_KEYS,
    SCORE_BINS,
    ExampleOptions,
    ExamplesPartial,
    distance_labels,
)

ARRAYS, META = "examples.npz", "examples.json"
# shaped by the options
FIXED = ("top_score", "top_doc", "top_query", "dec_priority", "dec_doc", "dec_score", "dec_query", "histogram",
         "distances")
GROWING = ("key_ids", "key_mass", "query_ids", "query_mass")  # a column a token seen
FORMAT, VERSION = "mha-viz head examples", 2  # 2: the score over rows that see MIN_KEYS keys, and its query


@dataclass
class HeadExamples:
    part: ExamplesPartial  # the merged sums of the whole corpus
    n_docs: int

    @property
    def options(self) -> ExampleOptions:
        return self.part.options

    @property
    def shape(self) -> tuple[int, int]:
        return self.part.num_layers, self.part.num_heads

    def top(self, layer: int, head: int) -> list[tuple[int, float]]:
        """(document index, score) pairs, best first; equal scores keep the earlier document."""
        docs, scores = self.part.top_doc[layer, head], self.part.top_score[layer, head]
        return [(int(d), float(s)) for d, s in zip(docs, scores) if d != EMPTY_DOC]

    def query(self, doc: int, layer: int, head: int) -> int:
        """The query row where the head fires most on a document it keeps (its best counted row, the
        one the score starts from); KeyError for a document the head does not keep."""
        for docs, queries in ((self.part.top_doc[layer, head], self.part.top_query[layer, head]),
                              (self.part.dec_doc[layer, head].ravel(), self.part.dec_query[layer, head].ravel())):
            hit = np.flatnonzero(docs == doc)
            if hit.size:
                return int(queries[hit[0]])
        raise KeyError(f"layer {layer}, head {head} keeps no document {doc}")

    def deciles(self, layer: int, head: int) -> list[list[tuple[int, float]]]:
        """For each tenth of the score range (0–0.1 first), the sampled (document, score) pairs, the
        highest score first (equal scores: the earlier document first)."""
        out = []
        for d in range(DECILES):
            docs, scores = self.part.dec_doc[layer, head, d], self.part.dec_score[layer, head, d]
            kept = [(int(x), float(s)) for x, s in zip(docs, scores) if x != EMPTY_DOC]
            out.append(sorted(kept, key=lambda pair: (-pair[1], pair[0])))
        return out

    def histogram(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(bin edges (SCORE_BINS + 1,), document counts (SCORE_BINS,)) of the head's scores."""
        return np.linspace(0, 1, SCORE_BINS + 1), self.part.histogram[layer, head].copy()

    def distances(self, layer: int, head: int) -> tuple[list[str], np.ndarray]:
        """(bin labels, attention mass per bin) of |query − key|."""
        return distance_labels(), self.part.distances[layer, head].copy()

    def top_tokens(self, layer: int, head: int, side: str = "key", k: int = 50) -> list[tuple[str, float]]:
        """The k tokens whose attention mass is largest as keys (what they receive) or as queries
        (what their rows give to the kept keys), with that mass summed over the corpus."""
        if side not in ("key", "query"):
            raise ValueError(f"side must be 'key' or 'query'; got {side!r}")
        ids, mass = ((self.part.key_ids, self.part.key_mass) if side == "key"
                     else (self.part.query_ids, self.part.query_mass))
        if not ids.size:
            return []
        row = mass[layer * self.part.num_heads + head]
        order = np.lexsort((ids, -row))[:k]
        return [(self.part.vocab.get(int(ids[i]), str(int(ids[i]))), float(row[i])) for i in order if row[i] > 0]

    def tokens(self, doc: int) -> list[str]:
        """A kept document's tokens (KeyError for a document no head keeps)."""
        return list(self.part.documents[doc])

    def pattern(self, doc: int, layer: int, head: int) -> np.ndarray:
        """(n, n) the head's attention on a document it keeps, from the kept keys (the others 0)."""
        keys, weights = self.part.patterns[(doc, layer, head)]
        n = keys.shape[0]
        out = np.zeros((n, n), dtype=np.float32)
        rows = np.repeat(np.arange(n), keys.shape[1])
        k, w = keys.ravel().astype(np.int64), weights.ravel().astype(np.float32)
        ok = k >= 0
        out[rows[ok], k[ok]] = w[ok]
        return out

    def ranking(self, statistic: str = "top_mean") -> np.ndarray:
        """(L, H): the mean of each head's top scores ("top_mean", the default: the best one alone
        ties between heads far more often) or its best score ("max")."""
        scores = np.where(np.isfinite(self.part.top_score), self.part.top_score, np.nan)
        if statistic == "max":
            return np.nan_to_num(scores[..., 0], nan=0.0)
        if statistic == "top_mean":
            with np.errstate(invalid="ignore"):
                return np.nan_to_num(np.nanmean(scores, -1), nan=0.0)
        raise ValueError(f"statistic must be 'max' or 'top_mean'; got {statistic!r}")

    def best_heads(self, statistic: str = "top_mean", k: int = 10) -> list[tuple[int, int]]:
        """The k heads with the highest `ranking(statistic)`, (layer, head) best first; ties go to the
        higher mean of the top scores, then to the higher best score, then layer-major."""
        primary, mean, best = (self.ranking(s).ravel() for s in (statistic, "top_mean", "max"))
        order = np.lexsort((np.arange(primary.size), -best, -mean, -primary))[:k]
        H = self.part.num_heads
        return [(int(i) // H, int(i) % H) for i in order]

    def nbytes(self) -> int:
        """Bytes the saved arrays take (their size in memory, before compression)."""
        return sum(a.nbytes for a in _arrays(self.part).values())

    def save(self, folder) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(folder / ARRAYS, **_arrays(self.part))
        o = self.options
        meta = {"format": FORMAT, "version": VERSION, "shape": list(self.shape), "n_docs": int(self.n_docs),
                "options": {"top": o.top, "per_decile": o.per_decile, "skip": o.skip},
                "vocab": {str(k): v for k, v in self.part.vocab.items()},
                "documents": {str(k): v for k, v in self.part.documents.items()}}
        (folder / META).write_text(json.dumps(meta, ensure_ascii=False) + "\n", encoding="utf-8")
        return folder

    @classmethod
    def load(cls, folder) -> "HeadExamples":
        """What `save` wrote; ValueError for a missing, damaged or inconsistent folder."""
        folder = Path(folder)
        try:
            meta = json.loads((folder / META).read_text(encoding="utf-8"))
            with np.load(folder / ARRAYS, allow_pickle=False) as data:
                a = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the head examples in {folder}: {exc}") from exc
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"{folder / META} is not head examples this mha-viz reads")
        if meta.get("version") != VERSION:
            raise ValueError(f"{folder / META} holds head examples scored by another version of mha-viz "
                             f"(format {meta.get('version')}, this one reads {VERSION}): run the corpus again")
        L, H = meta["shape"]
        o = ExampleOptions(**meta["options"])
        part = ExamplesPartial(L, H, o)
        for name in FIXED + GROWING:
            if name not in a or (name in FIXED and a[name].shape != getattr(part, name).shape):
                raise ValueError(f"{folder / ARRAYS}: {name} is missing or has the wrong shape")
            setattr(part, name, a[name])
        part.vocab = {int(k): v for k, v in meta["vocab"].items()}
        part.documents = {int(k): list(v) for k, v in meta["documents"].items()}
        offsets = a["pattern_offsets"]
        for i, (doc, layer, head) in enumerate(a["pattern_index"].tolist()):
            rows = slice(int(offsets[i]), int(offsets[i + 1]))
            part.patterns[(doc, layer, head)] = (a["pattern_keys"][rows], a["pattern_weights"][rows])
        return cls(part, int(meta["n_docs"]))


def _arrays(part: ExamplesPartial) -> dict[str, np.ndarray]:
    index = sorted(part.patterns)
    keys = [part.patterns[i][0] for i in index]
    offsets = np.cumsum([0] + [k.shape[0] for k in keys]).astype(np.int64)
    return {
        **{name: getattr(part, name) for name in FIXED + GROWING},
        "pattern_index": np.asarray(index, dtype=np.int64).reshape(-1, 3), "pattern_offsets": offsets,
        "pattern_keys": np.concatenate(keys) if keys else np.zeros((0, PATTERN_KEYS), dtype=np.int16),
        "pattern_weights": (np.concatenate([part.patterns[i][1] for i in index]) if index
                            else np.zeros((0, PATTERN_KEYS), dtype=np.float16)),
    }

