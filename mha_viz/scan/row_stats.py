"""The head table's pattern measures of one layer's heads, added up a block of query rows at a time
(`docs/head-metrics.md`, section 1; the same definitions as `metrics.head_stats`, which reads a
whole (n, n) matrix): what `mha_viz.scan` keeps of a long text's probabilities, with each row's
heaviest keys (`TopKeys`) and thumbnails (`Thumbnails`).

A block is (H, b, w) float32: every head's rows `start` … `start + b − 1` against the keys
`key_start` … `key_start + w − 1`, which hold every key those rows may see
(`mha_viz_models.attention.visibility.visible_span`); the keys outside it have probability 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.head_stats import key_masks, segments, token_keys
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING
from mha_viz.metrics.row_kernels import ROW_SUMS, measures_from_sums


@dataclass(frozen=True)
class TextFacts:
    """What the statistics read off the tokens (not the heads), on the device: their ids for the
    detectors, the [SEP]-like and punctuation keys with a column of ones, and the segments."""

    n: int
    causal: bool
    ids: torch.Tensor  # (n,) int64: one integer per token (`head_stats.token_keys`)
    before: torch.Tensor  # (n,) int64: the previous token's, −1 for the first (the induction target)
    columns: torch.Tensor  # (n, 3) float32: [SEP]-like, punctuation, ones
    segment: torch.Tensor | None  # (n,) int64 for a two-segment input, else None

    @classmethod
    def of(cls, tokens: list[str], token_ids: list[int], special: list[bool], *, causal: bool,
           device) -> "TextFacts":
        ids = torch.from_numpy(np.asarray(token_keys(token_ids, tokens), dtype=np.int64))
        before = torch.cat([torch.full((1,), -1, dtype=torch.int64), ids[:-1]])
        sep, punct = key_masks(tokens, special)
        columns = torch.stack([torch.from_numpy(sep), torch.from_numpy(punct), torch.ones(len(tokens))], 1)
        seg = segments(special)
        return cls(len(tokens), causal, ids.to(device), before.to(device), columns.to(device),
                   None if seg is None else torch.from_numpy(seg).to(device))


class RowStats:
    """One layer's (H,) sums (`row_kernels.ROW_SUMS`) over the rows added so far, by tensor operations on
    the block's device (a GPU's way; `row_kernels.BlockSums` is the CPU's); `finish` gives the measures."""

    def __init__(self, facts: TextFacts, heads: int, device) -> None:
        self.facts, self.device = facts, device
        self._buffers: list[torch.Tensor | None] = [None, None]
        zeros = lambda: torch.zeros(heads, dtype=torch.float64, device=device)  # noqa: E731
        self.sums = {name: zeros() for name in ROW_SUMS}
        self.sums["in_segment"] = (torch.full((heads,), float("inf"), dtype=torch.float64, device=device)
                                   if facts.segment is not None else zeros())

    def _scratch(self, which: int, size: int) -> torch.Tensor:
        kept = self._buffers[which]
        if kept is None or kept.numel() < size:
            kept = self._buffers[which] = torch.empty(size, dtype=torch.float32, device=self.device)
        return kept[:size]

    def add(self, A: torch.Tensor, start: int, key_start: int) -> torch.Tensor:
        """Add the rows of block A (H, b, w); returns each row's sum (H, b), float32."""
        f, s = self.facts, self.sums
        _, b, w = A.shape
        rows = torch.arange(start, start + b, device=A.device)  # (b,) the queries' positions
        cols = torch.arange(key_start, key_start + w, device=A.device)  # (w,) the keys'
        seen = (rows + 1 if f.causal else torch.full_like(rows, f.n)).double()  # k_i: keys row i may see
        floor = ENTROPY_SMOOTHING / seen  # (b,) the smoothing mass on each of them
        valid = (cols[None, :] <= rows[:, None]) if f.causal else None  # (b, w)
        # Â (H, b, w), 0 on the keys row i may not see, and −Σ_j Â ln Â (0 ln 0 = 0) in two scratch buffers
        # kept between blocks (a fresh block-sized tensor costs its page faults on the CPU); a row's sum
        # in float32, the rows' in float64
        smooth, logs = (self._scratch(i, A.numel()).view_as(A) for i in (0, 1))
        torch.add((floor[:, None].float() * valid) if valid is not None else floor[:, None].float(), A,
                  alpha=1 - ENTROPY_SMOOTHING, out=smooth).clamp_min_(1e-30)
        entropy = -torch.log(smooth, out=logs).mul_(smooth).sum(-1).double()  # (H, b)
        outside = (key_start if f.causal else f.n - w)  # visible keys outside the block: A = 0, Â = floor
        entropy -= outside * floor * torch.log(floor)
        s["entropy"] += entropy.sum(-1)
        wide = seen > 1
        s["norm_entropy"] += (entropy[:, wide] / torch.log(seen[wide])).sum(-1)
        s["norm_rows"] += wide.sum()
        s["confidence"] += A.amax(-1).sum(-1, dtype=torch.float64)
        # [SEP]-like keys, punctuation, the row's sum, and (causal) Σ_j A_ij (start − j) in one product
        back = (start - cols).float()[:, None]  # (w, 1)
        sums = A @ torch.cat([f.columns[key_start:key_start + w], back], 1)  # (H, b, 4)
        if f.causal:  # Σ_j A_ij |i − j| = Σ_j A_ij (start − j) + (i − start) Σ_j A_ij, every term ≥ 0 but the last few
            distance = sums[..., 3].double() + (rows - start).double() * sums[..., 2].double()
        else:
            distance = (A * (rows[:, None] - cols[None, :]).abs().float()).sum(-1).double()  # (H, b)
        s["distance"] += distance.sum(-1)
        for name, shift in (("self", 0), ("prev", -1), ("next", 1)):
            s[name] += torch.diagonal(A, start - key_start + shift, 1, 2).sum(-1, dtype=torch.float64)
        if key_start == 0:
            s["first"] += A[:, :, 0].sum(-1, dtype=torch.float64)
        sep_punct_total = sums.sum(1, dtype=torch.float64)
        s["sep"] += sep_punct_total[:, 0]
        s["punct"] += sep_punct_total[:, 1]
        s["total"] += sep_punct_total[:, 2]
        earlier = cols[None, :] < rows[:, None]  # (b, w)
        for name, key_ids, allowed in (
                ("duplicate_score", f.ids, earlier),
                ("induction_score", f.before, cols[None, :] <= rows[:, None])):  # P[i, j+1]: tok_j = tok_i, j < i
            r, c = torch.nonzero((f.ids[start:start + b, None] == key_ids[None, key_start:key_start + w])
                                 & allowed, as_tuple=True)
            if len(r):
                s[name] += A[:, r, c].sum(-1, dtype=torch.float64)
        self._beyond(A, start, key_start, rows, seen, valid, outside, sums[..., 2])
        return sums[..., 2]

    def _beyond(self, A: torch.Tensor, start: int, key_start: int, rows: torch.Tensor, seen: torch.Tensor,
                valid: torch.Tensor | None, outside: int, mass: torch.Tensor) -> None:
        """Add the block's rows to the sink mass and the measures beyond the sink (`head_stats`' definitions:
        the first key is the sink; a row keeping at least EMPTY_BELOW after it is renormalised)."""
        f, s = self.facts, self.sums
        lost = torch.where(mass > 0, (1 - mass).clamp_min(0), torch.zeros((), device=A.device))  # a learned sink
        s["sink"] += ((A[:, :, 0] if key_start == 0 else 0) + lost).sum(-1, dtype=torch.float64)
        c0 = 1 if key_start == 0 else 0  # the block's first key after the sink
        after = A[:, :, c0:]  # (H, b, w − c0)
        beyond = after.sum(-1)  # (H, b) float32
        kb = seen - 1  # keys beyond the sink each row may see
        kept = (beyond >= EMPTY_BELOW) & (rows >= 1) & (kb >= CHOICE_KEYS)
        inv = torch.where(kept, 1 / torch.where(kept, beyond, torch.ones((), device=A.device)),
                          torch.zeros((), device=A.device))
        floor = ENTROPY_SMOOTHING / kb.clamp_min(1)  # (b,) float64
        smooth = self._scratch(0, after.numel()).view(after.shape)
        base = floor[:, None].float() * valid[:, c0:] if valid is not None else floor[:, None].float()
        torch.add(base, after * inv[..., None], alpha=1 - ENTROPY_SMOOTHING, out=smooth).clamp_min_(1e-30)
        logs = self._scratch(1, after.numel()).view(after.shape)
        entropy = -torch.log(smooth, out=logs).mul_(smooth).sum(-1).double()  # (H, b)
        hidden = outside - (1 if key_start > 0 else 0)  # visible keys after the sink outside the block
        entropy -= hidden * floor * torch.log(floor)
        wide = kept & (kb > 1)
        s["beyond_norm_entropy"] += torch.where(wide, entropy / torch.log(kb.clamp_min(2)),
                                                torch.zeros((), dtype=torch.float64, device=A.device)).sum(-1)
        s["beyond_norm_rows"] += wide.sum(-1)
        s["beyond_rows"] += kept.sum(-1)
        r = torch.arange(A.shape[1], device=A.device)
        for name, shift in (("beyond_self", 0), ("beyond_prev", -1), ("beyond_next", 1)):
            c = rows + shift - key_start  # (b,) the key's place in the block
            ok = (c >= 0) & (c < A.shape[2]) & (rows + shift >= 1) & (rows + shift < f.n)
            s[name] += (A[:, r[ok], c[ok]] * inv[:, r[ok]]).sum(-1, dtype=torch.float64)
        marks = (after @ f.columns[key_start + c0:key_start + A.shape[2], :2]) * inv[..., None]  # (H, b, 2)
        s["beyond_sep"] += marks[..., 0].sum(-1, dtype=torch.float64)
        s["beyond_punct"] += marks[..., 1].sum(-1, dtype=torch.float64)
        if f.segment is not None:
            same = (f.segment[rows, None] == f.segment[None, key_start + c0:key_start + A.shape[2]]).float()
            own = torch.where(kept, (after * same).sum(-1) * inv, torch.full((), float("inf"), device=A.device))
            s["in_segment"] = torch.minimum(s["in_segment"], own.amin(-1).double())

    def finish(self) -> dict[str, np.ndarray]:
        """(H,) float64 arrays under `head_stats.STAT_NAMES` (`row_kernels.measures_from_sums`)."""
        return measures_from_sums({name: v.cpu().numpy() for name, v in self.sums.items()}, self.facts.n)


class TopKeys:
    """Each row's `top_k` heaviest keys with weight ≥ `min_weight`, heaviest first (key −1 and weight
    0 where fewer qualify), and the row's mass outside them, for one layer's heads."""

    def __init__(self, heads: int, n: int, top_k: int, min_weight: float, device) -> None:
        self.top_k, self.min_weight = top_k, min_weight
        self.keys = torch.full((heads, n, top_k), -1, dtype=torch.int32, device=device)
        self.weights = torch.zeros((heads, n, top_k), dtype=torch.float32, device=device)
        self.rest = torch.zeros((heads, n), dtype=torch.float32, device=device)

    def add(self, A: torch.Tensor, start: int, key_start: int, row_sums: torch.Tensor) -> None:
        k = min(self.top_k, A.shape[-1])
        weights, keys = torch.topk(A, k, dim=-1)  # (H, b, k), heaviest first
        kept = weights >= self.min_weight
        weights = torch.where(kept, weights, torch.zeros((), device=A.device))
        stop = start + A.shape[1]
        self.weights[:, start:stop, :k] = weights
        self.keys[:, start:stop, :k] = torch.where(kept, keys + key_start, torch.full((), -1, device=A.device)).int()
        self.rest[:, start:stop] = row_sums - weights.sum(-1)


class Thumbnails:
    """Each head max-pooled to at most `size` × `size` cells, as `views.detail.max_pool` pools a whole
    (n, n) matrix (PyTorch's adaptive max-pool: cell a covers rows ⌊a·n/s⌋ … ⌈(a+1)·n/s⌉ − 1)."""

    def __init__(self, heads: int, n: int, size: int, device) -> None:
        self.n, self.size = n, min(size, n)
        self.cells = torch.zeros((heads, self.size, self.size), dtype=torch.float32, device=device)
        a = torch.arange(self.size)
        self.row_start = (a * n) // self.size  # (s,)
        self.row_stop = -((-(a + 1) * n) // self.size)  # ceil

    def add(self, A: torch.Tensor, start: int, key_start: int) -> None:
        """Rows first (the max over each cell's rows in the block), then keys: the key pooling runs on a
        few rows a cell instead of every row."""
        H, b, w = A.shape
        stop = start + b
        cells = np.flatnonzero((self.row_start.numpy() < stop) & (self.row_stop.numpy() > start))
        down = torch.stack([A[:, max(int(self.row_start[c]), start) - start:min(int(self.row_stop[c]), stop) - start]
                            .amax(1) for c in cells], 1)  # (H, cells, w)
        if w != self.n:  # the keys outside the block's span have probability 0
            down = torch.nn.functional.pad(down, (key_start, self.n - key_start - w))  # (H, cells, n)
        across = down if self.size == self.n else torch.nn.functional.adaptive_max_pool1d(down, self.size)
        index = torch.as_tensor(cells, device=A.device)
        self.cells[:, index] = torch.maximum(self.cells[:, index], across)
