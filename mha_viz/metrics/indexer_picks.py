"""What a sparse-attention layer's indexer kept (DeepSeek-V3.2, GLM-5: `indexed_attention`), measured per head against
the dense softmax the same layer would give with every key (issue 89): the share of the dense mass on the keys the
indexer picked, and how many of them are among the dense softmax's own heaviest as many. Both from one forward
(`mha_viz_models.reading.sparse`: each indexed layer called a second time on its own inputs, every key picked). No
other tool shows either: what a researcher asks of a sparse model is whether its indexer keeps what the heads would
have read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mha_viz.budget import capture_budget
from mha_viz.text.tokenize import InputError, tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.reading import sparse


@dataclass(frozen=True)
class SparseSelection:
    """The indexed layers of one text. layers: their numbers (as `LoadedModel.layer_ids`); picked (S, n, n) bool:
    the keys each query's indexer kept that it may see; row_kept (S, H, n): each row's dense mass on them; overlap
    (S, H, n): the share of them among the row's dense heaviest as many (ties counted in)."""
    tokens: list[str]
    layers: tuple[int, ...]
    picked: np.ndarray
    row_kept: np.ndarray
    overlap: np.ndarray

    def table(self) -> pd.DataFrame:
        """One row a head of each indexed layer: layer, head, kept_mass and overlap (each the mean over the rows)."""
        S, H = self.row_kept.shape[:2]
        return pd.DataFrame({"layer": np.repeat(self.layers, H), "head": np.tile(np.arange(H), S),
                             "kept_mass": self.row_kept.mean(-1).ravel(), "overlap": self.overlap.mean(-1).ravel()})


def measured(picked: torch.Tensor, dense: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(each row's dense mass on its picked keys, each row's share of picked keys among its dense heaviest as many),
    (H, n) each, for picked (n, n) bool and dense (H, n, n). A row that picked no key: 0 and 0."""
    mask = picked[None].float()
    kept = (dense * mask).sum(-1)  # (H, n)
    count = picked.sum(-1)  # (n,)
    ranked = dense.sort(-1, descending=True).values
    threshold = ranked.gather(-1, (count.clamp(min=1) - 1).long().expand(dense.shape[0], -1)[..., None])  # (H, n, 1)
    among = ((dense >= threshold) & picked[None]).sum(-1).float()
    share = torch.where(count > 0, torch.minimum(among, count.float()) / count.clamp(min=1), 0.0)
    return kept.numpy().astype(np.float64), share.numpy().astype(np.float64)


def has_sparse_layers(model: LoadedModel) -> bool:
    """Whether `model` has an attention layer whose indexer picks its keys, read through its own modules."""
    return not model.local_attention and any(sparse.indexed(m) for m, _ in model.attention_modules)


def need_bytes(model: LoadedModel, n: int) -> int:
    """What `sparse_selection` holds at once over n tokens: one layer's sparse and dense probabilities (float32, every
    head) and every indexed layer's picks (n × n booleans)."""
    layers = sum(sparse.indexed(m) for m, _ in model.attention_modules)
    return 2 * 4 * model.num_heads * n * n + layers * n * n


def _require_sparse(model: LoadedModel) -> None:
    """Raise InputError for a model without indexed layers read through its own modules."""
    if not has_sparse_layers(model):
        raise InputError(f"'{model.name}' has no sparse attention layer whose indexer picks its keys "
                         f"(DeepSeek-V3.2's and GLM-5's indexed attention have one).")


def longest_fitting(model: LoadedModel, n: int) -> int:
    """The most tokens, up to n, whose `need_bytes` fit the capture budget (1 when none does)."""
    return next((m for m in range(n, 1, -1) if capture_budget.fits(need_bytes(model, m))), 1)


def sparse_selection(model: LoadedModel, text: str, *, max_tokens: int | None = None) -> SparseSelection:
    """Each indexed layer's picks and their measures on `text` (one forward, under the model's lock; one layer's
    probabilities held at a time, within the capture budget, MHA_VIZ_MAX_CAPTURE_MB). Raises InputError for a model
    with no indexed layer, or one whose attention is not its own modules' (our MHA in place), or a text past the
    budget (naming the length that fits)."""
    _require_sparse(model)
    toks = tokenize(model, text, max_tokens)
    need = need_bytes(model, toks.n)
    if not capture_budget.fits(need):
        capture_budget.check(need, f"Measuring the indexer's picks of '{model.name}' on {toks.n} tokens",
                             f"use a text of at most {longest_fitting(model, toks.n)} tokens, or raise the limit.")

    def reduced(layer: sparse.SparseLayer) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        kept, share = measured(layer.picked, layer.dense)
        return layer.layer, layer.picked.numpy(), kept, share
    with model.lock:
        read = sparse.read(model.hf_model, [m for m, _ in model.attention_modules],
                           torch.tensor([toks.ids], device=model.device), reduced)
    ids = model.layer_ids
    return SparseSelection(tokens=toks.display, layers=tuple(ids[r[0]] for r in read),
                           picked=np.stack([r[1] for r in read]), row_kept=np.stack([r[2] for r in read]),
                           overlap=np.stack([r[3] for r in read]))


@dataclass(frozen=True)
class Picks:
    """The keys each query's indexer picked, in every indexed layer of one text, kept as indices (n × k a layer,
    not n × n: what a long run keeps). layers: their numbers (as `LoadedModel.layer_ids`); keys (S, n, k) int16
    (int32 past 32,767 tokens), each query's picks (−1: none); a decoder's query sees no key after itself, which its
    picks never count."""
    tokens: list[str]
    layers: tuple[int, ...]
    keys: np.ndarray

    @property
    def n(self) -> int:
        return len(self.tokens)

    def rows(self, number: int, start: int, stop: int) -> np.ndarray:
        """bool (stop − start, n): which keys queries start … stop − 1 of layer `number` picked."""
        picks = self.keys[self.layers.index(number), start:stop]  # (b, k)
        out = np.zeros((len(picks), self.n + 1), dtype=bool)  # a last column for −1, dropped
        out[np.arange(len(picks))[:, None], np.where(picks < 0, self.n, picks)] = True
        visible = np.arange(self.n)[None, :] <= np.arange(start, start + len(picks))[:, None]
        return out[:, :self.n] & visible

    def column(self, number: int, key: int) -> np.ndarray:
        """bool (n,): which queries of layer `number` picked `key`."""
        picked = (self.keys[self.layers.index(number)] == key).any(-1)
        return picked & (np.arange(self.n) >= key)

    def layer(self, number: int) -> "LayerPicks | None":
        """Layer `number`'s picks, or None for a layer that is not indexed."""
        return LayerPicks(self, number) if number in self.layers else None


@dataclass(frozen=True)
class LayerPicks:
    """One indexed layer's picks (`Picks.rows` and `Picks.column` of layer `number`)."""
    picks: Picks
    number: int

    def rows(self, start: int, stop: int) -> np.ndarray:
        return self.picks.rows(self.number, start, stop)

    def column(self, key: int) -> np.ndarray:
        return self.picks.column(self.number, key)


def sparse_picks(model: LoadedModel, text: str, *, max_tokens: int | None = None) -> Picks:
    """Every indexed layer's picks on `text`, from one forward that keeps nothing else (under the model's lock: one
    layer's probabilities held at a time, as a long run's forward holds them). Raises InputError as
    `sparse_selection` does for a model without indexed layers."""
    _require_sparse(model)
    toks = tokenize(model, text, max_tokens)
    capture_budget.check(picks_bytes(model, toks.n), f"Keeping the indexer's picks of '{model.name}' on {toks.n} "
                         "tokens", "use a shorter text, or raise the limit.")
    with model.lock:
        found = sparse.picks(model.hf_model, [m for m, _ in model.attention_modules],
                             torch.tensor([toks.ids], device=model.device))
    ids = model.layer_ids
    return Picks(tokens=toks.display, layers=tuple(ids[at] for at in found),
                 keys=np.stack([p.numpy() for p in found.values()]).astype(_index_type(toks.n)))


def _index_type(n: int):
    """The narrowest integer that holds positions 0 … n − 1 and −1."""
    return np.int16 if n <= np.iinfo(np.int16).max else np.int32


def picks_bytes(model: LoadedModel, n: int) -> int:
    """What `sparse_picks` keeps over n tokens: each indexed layer's picks, n × min(index_topk, n) positions."""
    layers = [m for m, _ in model.attention_modules if sparse.indexed(m)]
    k = min(n, max((getattr(m.indexer, "index_topk", n) for m in layers if m.indexer is not None), default=n))
    return len(layers) * n * k * np.dtype(_index_type(n)).itemsize
