"""Hide tokens (the special tokens, the first token: attention sinks) from a run and renormalise.

`drop_tokens(run, mask)` removes the masked tokens from both axes of every head and divides
each remaining row by the attention it keeps. A query whose kept attention is (almost) nothing
— e.g. a causal head that puts all of a query's attention on the dropped first token — is not
divided by zero: its row stays all zeros and is listed in `Hidden.empty`. The attention that
went to the hidden tokens is kept per head (`Hidden.mass`) for a sink-mass grid.

Plain functions over arrays; the run is any object with AttentionRun's fields (this module
imports nothing from the package but `memory_columns`, so `AttentionRun.drop_tokens` can call it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from mha_viz.capture import memory_columns

EMPTY_BELOW = 1e-6  # a row keeping less than this much attention is left as zeros, not rescaled
FIRST = "first"  # what `hide_mask` can hide
SPECIAL = "special"


@dataclass(frozen=True)
class Hidden:
    """What `drop_tokens` removed and what that cost.

    kept: the original positions of the kept tokens (ascending); removed: the original positions
    removed, removed_tokens their display tokens; n_before: tokens before the drop;
    mass: float32 (layers, heads), each head's mean over the kept queries of the attention that
    went to the removed keys (the sink mass); empty: bool (layers, heads, n kept), query rows left
    with less than EMPTY_BELOW attention, kept as zeros; label: "renormalised without …".
    """

    kept: np.ndarray
    removed: np.ndarray
    removed_tokens: tuple[str, ...]
    n_before: int
    mass: np.ndarray
    empty: np.ndarray
    label: str

    @property
    def num_empty(self) -> int:
        """How many (layer, head, query) rows were left with no attention."""
        return int(self.empty.sum())

    @property
    def heads_with_empty_rows(self) -> int:
        return int(self.empty.any(-1).sum())


def hide_mask(run, *, special: bool = False, first: bool = False) -> np.ndarray:
    """bool (n,): True for the tokens to hide — the special tokens ([CLS], [SEP], <s>…) and/or
    the first token (whatever it is: a decoder's attention sink)."""
    mask = np.zeros(run.n, dtype=bool)
    if special:
        mask |= np.asarray(run.special_mask, dtype=bool)[: run.n]
    if first and run.n:
        mask[0] = True
    return mask


def label(tokens: list[str], removed: np.ndarray) -> str:
    """"renormalised without [CLS], [SEP]" or "… without the first token (<s>)"; repeated tokens
    once each, at most 6 named."""
    removed = [int(i) for i in removed]
    if removed == [0]:
        return f"renormalised without the first token ({tokens[0]})"
    names = list(dict.fromkeys(tokens[i] for i in removed))
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"renormalised without {shown}"


SUMS_TO_ONE = 1e-3  # a row further than this from summing to 1 gave some attention to no token


def learned_sink_share(run) -> np.ndarray | None:
    """(layers, heads): the mean over queries of the attention each head gave no token, 1 − Σ_j A_ij,
    for a model with learned sink logits (GPT-OSS: one more key column in each head's softmax, then
    dropped); None when every row sums to 1. A long run's from its scan: each row's kept weights plus
    the rest (`Scan.rest`) are the row's sum."""
    scan = None if run.is_dense else run.summary
    if scan is not None:
        share = 1.0 - (scan.weights.sum(-1, dtype=np.float64) + scan.rest_mass).mean(-1)  # (L, H)
    else:  # a compressed layer's entries (DeepSeek-V4) are not its sink's
        share = np.stack([memory_columns.shares(run, layer)[2].mean(-1) for layer in range(run.num_layers)])  # (L, H)
    return share.astype(np.float32) if float(np.abs(share).max()) > SUMS_TO_ONE else None


def kept_rows(rows: np.ndarray, kept: np.ndarray, removed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kept query rows (h, b, n) over the kept keys: (float32 (h, b, m) each row divided by what it keeps
    there, float64 (h, b) what it gave the removed keys, bool (h, b) the rows keeping less than EMPTY_BELOW,
    left zeros). What `drop_tokens` does to every head, and a long run's hidden tokens to a block of rows
    (`mha_viz.derived`)."""
    lost = (rows[..., removed].sum(-1, dtype=np.float64) if len(removed)
            else np.zeros(rows.shape[:-1], dtype=np.float64))
    block = rows[..., kept]
    total = block.sum(-1, dtype=np.float64)
    gone = total < EMPTY_BELOW
    scale = np.where(gone, 0.0, 1.0 / np.where(gone, 1.0, total)).astype(np.float32)
    return block * scale[..., None], lost, gone


def hidden_of(run, kept: np.ndarray, removed: np.ndarray, mass: np.ndarray, empty: np.ndarray) -> Hidden:
    """What hiding the tokens `removed` of `run` (keeping `kept`) cost: mass (L, H) and empty (L, H, m) measured."""
    return Hidden(kept=kept, removed=removed, removed_tokens=tuple(run.tokens[i] for i in removed),
                  n_before=run.n, mass=mass, empty=empty, label=label(run.tokens, removed))


def split(run, mask) -> tuple[np.ndarray, np.ndarray]:
    """(kept, removed) positions of `mask` (bool, length n: True hides). Raises ValueError when the mask is
    not n booleans or would remove every token."""
    mask = np.asarray(mask)
    if mask.shape != (run.n,) or mask.dtype != bool:
        raise ValueError(f"the mask must be {run.n} booleans (one per token); got {mask.dtype} {mask.shape}")
    kept = np.flatnonzero(~mask)
    if not len(kept):
        raise ValueError("the mask would hide every token; at least one must stay")
    return kept, np.flatnonzero(mask)


def kept_fields(run, kept: np.ndarray, removed: np.ndarray) -> dict:
    """The per-token fields of a run without the tokens `removed` (tokens, ids, masks, word ids, count)."""
    def pick(values):
        return [values[i] for i in kept] if len(values) == run.n else list(values)
    return dict(tokens=pick(run.tokens), token_ids=pick(run.token_ids), raw_tokens=pick(run.raw_tokens),
                special_mask=pick(run.special_mask), word_ids=pick(run.word_ids),
                num_input_tokens=max(run.num_input_tokens - len(removed), len(kept)))


def drop_tokens(run, mask) -> object:
    """A new run without the tokens where `mask` (bool, length n) is True, on both axes; each
    kept row divided by the attention it keeps over the kept keys. Rows keeping less than
    EMPTY_BELOW stay zeros and are listed in `.hidden.empty`. The new run's `hidden` says what
    was removed, the sink mass per head and the label. Raises ValueError when the mask is not
    n booleans or would remove every token."""
    kept, removed = split(run, mask)
    L, H, m = run.num_layers, run.num_heads, len(kept)
    att = np.empty((L, H, m, m), dtype=np.float32)
    mass = np.zeros((L, H), dtype=np.float32)
    empty = np.zeros((L, H, m), dtype=bool)
    for layer in range(L):  # one layer at a time: no second full-size temporary
        att[layer], lost, empty[layer] = kept_rows(np.asarray(run.attentions[layer])[:, kept], kept, removed)
        mass[layer] = lost.mean(-1)
    outputs = None if run.head_outputs is None else np.ascontiguousarray(run.head_outputs[:, :, kept])
    norms = None if run.value_norms is None else np.ascontiguousarray(run.value_norms[:, :, kept])
    return dataclasses.replace(run, attentions=att, head_outputs=outputs, value_norms=norms, memory=None,
                               hidden=hidden_of(run, kept, removed, mass, empty), **kept_fields(run, kept, removed))
