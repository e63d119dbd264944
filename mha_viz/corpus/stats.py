"""Head statistics over a corpus (`CorpusStats`), and their files on disk.

A saved folder holds `table.csv` (one row per head), `arrays.npz` (similarity, and importance
when there is one; read without unpickling) and `meta.json` (model, documents, tokens, corpus
hash, token cap, seconds), and, when the examples were computed, `examples.npz` and
`examples.json` (`corpus.examples_result`). `CorpusStats.load` checks that the three agree and raises ValueError
for a folder that is not one `save` wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mha_viz.corpus.examples_result import ARRAYS as EXAMPLE_ARRAYS
from mha_viz.corpus.examples_result import META as EXAMPLE_META
from mha_viz.corpus.examples_result import HeadExamples

FORMAT = "mha-viz corpus stats"
VERSION = 1
TABLE, ARRAYS, META = "table.csv", "arrays.npz", "meta.json"
REQUIRED = ("layer", "head", "pattern", "n_docs")  # table columns every save has


@dataclass
class CorpusStats:
    """What `corpus.head_statistics` returns.

    table: one row per (layer, head): layer, head, for every numeric `metrics.head_table`
    column its mean over documents (same name) and population std (name + "_std"), `pattern`
    (the class most documents gave) and n_docs.
    importance: (L, H) accumulated importance with each layer's row L2-normalised, or None
    (`importance_note` says why). similarity: (L·H, L·H) pattern cosine averaged over documents,
    index layer * H + head. lengths: how many documents had each token count (index), as read (after
    `max_tokens`), or None for statistics saved before they were recorded.
    """

    table: pd.DataFrame
    importance: np.ndarray | None
    similarity: np.ndarray
    model_name: str
    n_docs: int
    n_tokens: int
    corpus_hash: str = ""
    max_tokens: int | None = None
    seconds: float = 0.0
    importance_note: str = ""
    examples: HeadExamples | None = None  # each head's examples (`corpus.head_examples`), when computed
    lengths: np.ndarray | None = None  # (longest + 1,): documents by token count (after the cut); None: not recorded

    @property
    def num_layers(self) -> int:
        return int(self.table["layer"].max()) + 1

    @property
    def num_heads(self) -> int:
        return int(self.table["head"].max()) + 1

    @property
    def metric_columns(self) -> list[str]:
        """The statistics that have a mean and a std (the head table's numeric columns)."""
        return [c for c in self.table.columns if f"{c}_std" in self.table.columns]

    def grid(self, column: str) -> np.ndarray:
        """(L, H) values of one column of the table."""
        return self.table.sort_values(["layer", "head"])[column].to_numpy().reshape(self.num_layers, self.num_heads)

    def save(self, folder) -> Path:
        """Write the three files into `folder` (created if needed); returns the folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.table.to_csv(folder / TABLE, index=False)
        arrays = {"similarity": np.asarray(self.similarity, dtype=np.float64)}
        if self.importance is not None:
            arrays["importance"] = np.asarray(self.importance, dtype=np.float64)
        if self.lengths is not None:
            arrays["lengths"] = np.asarray(self.lengths, dtype=np.int64)
        np.savez(folder / ARRAYS, **arrays)
        meta = {"format": FORMAT, "version": VERSION, "model_name": self.model_name, "n_docs": int(self.n_docs),
                "n_tokens": int(self.n_tokens), "corpus_hash": self.corpus_hash,
                "max_tokens": None if self.max_tokens is None else int(self.max_tokens),
                "seconds": float(self.seconds), "importance_note": self.importance_note}
        (folder / META).write_text(json.dumps(meta, indent=2) + "\n")
        for name in (EXAMPLE_ARRAYS, EXAMPLE_META):  # a folder saved again without examples has none
            (folder / name).unlink(missing_ok=True)
        if self.examples is not None:
            self.examples.save(folder)
        return folder

    @classmethod
    def load(cls, folder) -> "CorpusStats":
        """Statistics written by `save`. Raises ValueError when a file is missing or damaged, or
        when the files disagree (table rows, array shapes)."""
        folder = Path(folder)
        for name in (TABLE, ARRAYS, META):
            if not (folder / name).is_file():
                raise ValueError(f"{folder} is not a saved corpus statistics folder: {name} is missing")
        meta = _meta(folder / META)
        try:
            table = pd.read_csv(folder / TABLE)
            with np.load(folder / ARRAYS, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except Exception as exc:  # noqa: BLE001 - any parse failure means a damaged file
            raise ValueError(f"cannot read the corpus statistics in {folder}: {type(exc).__name__}: {exc}") from exc
        missing = [c for c in REQUIRED if c not in table.columns]
        if missing or table.empty:
            raise ValueError(f"{folder / TABLE} lacks the columns {missing or REQUIRED}")
        L, H = int(table["layer"].max()) + 1, int(table["head"].max()) + 1
        if len(table) != L * H or "similarity" not in arrays or arrays["similarity"].shape != (L * H, L * H):
            raise ValueError(f"{folder}: the table ({len(table)} rows) and the similarity matrix "
                             f"({arrays.get('similarity', np.empty(0)).shape}) do not describe {L} × {H} heads")
        importance = arrays.get("importance")
        if importance is not None and importance.shape != (L, H):
            raise ValueError(f"{folder}: importance has shape {importance.shape}, not {(L, H)}")
        lengths = arrays.get("lengths")  # absent from folders saved before it was recorded
        if lengths is not None and (lengths.ndim != 1 or int(lengths.sum()) != meta["n_docs"]):
            raise ValueError(f"{folder}: the document lengths count {int(lengths.sum())} documents, not "
                             f"{meta['n_docs']}")
        table["pattern"] = table["pattern"].astype(str)
        examples = HeadExamples.load(folder) if (folder / EXAMPLE_META).is_file() else None
        if examples is not None and examples.shape != (L, H):
            raise ValueError(f"{folder}: the head examples describe {examples.shape} heads, not {(L, H)}")
        return cls(table=table, importance=importance, similarity=arrays["similarity"],
                   model_name=meta["model_name"], n_docs=meta["n_docs"], n_tokens=meta["n_tokens"],
                   corpus_hash=meta["corpus_hash"], max_tokens=meta["max_tokens"], seconds=meta["seconds"],
                   importance_note=meta["importance_note"], examples=examples, lengths=lengths)


def _meta(path: Path) -> dict:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not the metadata of saved corpus statistics")
    if meta.get("version") != VERSION:
        raise ValueError(f"{path} has format version {meta.get('version')}; this mha-viz reads {VERSION}")
    kinds = {"model_name": str, "n_docs": int, "n_tokens": int, "corpus_hash": str, "seconds": (int, float),
             "importance_note": str, "max_tokens": (int, type(None))}
    bad = [k for k, kind in kinds.items() if not isinstance(meta.get(k), kind) or isinstance(meta.get(k), bool)]
    if bad:
        raise ValueError(f"{path}: missing or wrong values for {', '.join(bad)}")
    return meta
