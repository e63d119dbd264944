"""What `mha_viz.scan` keeps of a long text (`Scan`): the head table, the thumbnails, each row's
heaviest keys and the mass outside them, with exact rows on demand; saved to and reopened from an
`.npz` without pickle."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from mha_viz.capture.own_outputs import OwnOutputs
from mha_viz.scan.rows import RowSource

FORMAT = "mha-viz scan 1"  # what `save` writes under "format"; `load` refuses another


@dataclass(eq=False)  # arrays and a table: compared by identity
class Scan:
    """Every head of one text, from one pass (`mha_viz.scan`).

    table: one row per (layer, head), the pattern measures of `metrics.head_table` (same columns, same
        definitions) over every query row of the text; where the scan's forward took each layer's output from
        its blocks (`LoadedModel.takes_outputs`), the output measures too (output_norm, mean_output_norm).
    pooled: float32 (layers, heads, s, s), each head max-pooled to at most s × s cells (`thumb`).
    keys, weights: int32 and float32 (layers, heads, n, top_k): `top` of every head.
    rest_mass: float32 (layers, heads, n): `rest` of every head.
    Layers are rows 0 … L − 1 of these arrays; `layer_ids` names them by the model's numbering (a
    hybrid's attention layers), as the table's `layer` column does.
    """

    tokens: list[str]
    token_ids: list[int]
    special_mask: list[bool]
    model_name: str
    layer_ids: list[int]
    is_causal: bool
    table: pd.DataFrame
    pooled: np.ndarray
    keys: np.ndarray
    weights: np.ndarray
    rest_mass: np.ndarray
    top_k: int
    min_weight: float
    num_input_tokens: int = 0
    num_input_tokens_is_estimate: bool = False
    precision: str = ""
    # (layer, head, start, stop) -> float32 (stop − start, n): recomputes rows from what the scan kept
    # (`mha_viz.scan.rows.RowSource`); None for a reopened scan until `attach`
    row_source: Callable | None = field(default=None, repr=False, compare=False)
    # what the model itself made of the text (its loss and last logits, or its embedding) and each head's mean
    # output, read after the scan's forward (`capture.own_outputs.from_hidden`; a decoder's at the first read:
    # `own_later.LaterOwn`); None where not made (half
    # precision, a family read through its own attention, a reopened scan)
    own: OwnOutputs | None = field(default=None, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def num_layers(self) -> int:
        return self.keys.shape[0]

    @property
    def num_heads(self) -> int:
        return self.keys.shape[1]

    def _check(self, layer: int, head: int) -> None:
        if not (0 <= layer < self.num_layers and 0 <= head < self.num_heads):
            raise IndexError(f"no head ({layer}, {head}): this scan has {self.num_layers} layers (rows 0 … "
                             f"{self.num_layers - 1}) × {self.num_heads} heads")

    def top(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys, weights), both (n, top_k): each query row's heaviest keys with weight ≥ `min_weight`,
        heaviest first; where fewer qualify, the key is −1 and the weight 0."""
        self._check(layer, head)
        return self.keys[layer, head], self.weights[layer, head]

    def rest(self, layer: int, head: int) -> np.ndarray:
        """(n,) float32: each row's attention outside its kept keys, i.e. the row's sum minus the
        kept weights. A head with a learned sink (GPT-OSS) gives part of each row to no token: that
        share, 1 − the row's sum, is in neither the kept weights nor `rest` (`sink_share`)."""
        self._check(layer, head)
        return self.rest_mass[layer, head]

    def sink_share(self, layer: int, head: int) -> np.ndarray:
        """(n,) float32: what each row gave to no token (a learned sink), 1 − kept − rest; 0 up to
        rounding for a head without one."""
        keys, weights = self.top(layer, head)
        return np.clip(1.0 - weights.sum(-1) - self.rest(layer, head), 0.0, None).astype(np.float32)

    def rows(self, layer: int, head: int, start: int, stop: int) -> np.ndarray:
        """float32 (stop − start, n): the exact probabilities of query rows start … stop − 1,
        recomputed from what the scan kept (each layer's queries and keys). A reopened scan needs `attach`."""
        self._check(layer, head)
        if not 0 <= start < stop <= self.n:
            raise IndexError(f"rows {start} … {stop - 1} are not within the text's {self.n} tokens")
        if self.row_source is None:
            raise ValueError("This scan was reopened from a file: attach the model it was computed with "
                             "(scan.attach(model)) to recompute its rows.")
        return self.row_source(layer, head, start, stop)

    def attach(self, model) -> "Scan":
        """Recompute rows with `model` (the one the scan was computed with; its run is made again,
        once, at the first `rows`). Returns the scan."""
        theirs = (model.name, list(model.layer_ids), model.num_heads, model.precision)
        ours = (self.model_name, list(self.layer_ids), self.num_heads, self.precision or model.precision)
        if theirs != ours:
            raise ValueError(f"This scan was computed with '{self.model_name}' ({len(self.layer_ids)} layers × "
                             f"{self.num_heads} heads, {self.precision}), not '{model.name}' ({len(model.layer_ids)} "
                             f"× {model.num_heads}, {model.precision}): its rows would not be this scan's.")
        self.row_source = RowSource(model, self.token_ids)
        return self

    def save(self, path):
        """Write the scan to an `.npz` (no pickle: strings as unicode arrays, facts as JSON) at `path`, or
        into a binary file object (a download's buffer); returns the path (or the file object)."""
        table = {f"table.{c}": np.asarray(self.table[c].tolist() if c == "pattern" else self.table[c])
                 for c in self.table.columns}
        facts = dict(format=FORMAT, model_name=self.model_name, layer_ids=list(map(int, self.layer_ids)),
                     is_causal=self.is_causal, top_k=self.top_k, min_weight=self.min_weight,
                     num_input_tokens=self.num_input_tokens, precision=self.precision,
                     num_input_tokens_is_estimate=self.num_input_tokens_is_estimate,
                     columns=list(self.table.columns))
        arrays = dict(facts=np.asarray(json.dumps(facts)), tokens=np.asarray(self.tokens, dtype=str),
                      token_ids=np.asarray(self.token_ids, dtype=np.int64),
                      special_mask=np.asarray(self.special_mask, dtype=bool), pooled=self.pooled, keys=self.keys,
                      weights=self.weights, rest_mass=self.rest_mass, **table)
        if hasattr(path, "write"):
            np.savez(path, **arrays)
            return path
        path = Path(path)
        with open(path, "wb") as fh:  # a file object: np.savez would add ".npz" to another name
            np.savez(fh, **arrays)
        return path

    @classmethod
    def load(cls, path, model=None) -> "Scan":
        """A scan saved by `save`; with `model`, attached for `rows`. Raises ValueError for a file
        that is not one."""
        try:
            data = np.load(path, allow_pickle=False)
            facts = json.loads(str(data["facts"]))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, OSError) as exc:
            raise ValueError(f"{path} is not a saved scan ({type(exc).__name__}: {exc})") from None
        with data:
            if facts.get("format") != FORMAT:
                raise ValueError(f"{path} is not a saved scan of this version ({facts.get('format')!r})")
            table = pd.DataFrame({c: data[f"table.{c}"] for c in facts["columns"]})
            scan = cls(tokens=data["tokens"].tolist(), token_ids=data["token_ids"].tolist(),
                       special_mask=data["special_mask"].tolist(), model_name=facts["model_name"],
                       layer_ids=facts["layer_ids"], is_causal=facts["is_causal"], table=table,
                       pooled=data["pooled"], keys=data["keys"], weights=data["weights"],
                       rest_mass=data["rest_mass"], top_k=facts["top_k"], min_weight=facts["min_weight"],
                       num_input_tokens=facts["num_input_tokens"],
                       num_input_tokens_is_estimate=facts["num_input_tokens_is_estimate"],
                       precision=facts["precision"])
        return scan.attach(model) if model is not None else scan
