"""The torch backend of the row measures (`row_measures`): a block of query rows of every head added to the
sums of ROW_SUMS by tensor operations on the block's device (a GPU's way; `row_kernels.BlockSums` is the
CPU's), then `finish` gives the measures.

A block is (H, b, w) float32: every head's rows `start` … `start + b − 1` against the keys
`key_start` … `key_start + w − 1`, which hold every key those rows may see with a probability other than 0
(a long text's `mha_viz_models.attention.visibility.visible_span`; the head table's whole rows).
"""

from __future__ import annotations

import numpy as np
import torch

from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.measures import CHOICE_KEYS, ENTROPY_SMOOTHING
from mha_viz.metrics.row_measures import TextFacts, measures_from_sums


class _OnDevice:
    """TextFacts' arrays as tensors on a device: ids, each match record's shifted ids, the columns of one product
    (the table's key masks and ones: the masks' sums and the row's), the segments."""

    def __init__(self, facts: TextFacts, device) -> None:
        self.n, self.causal, self.skip, self.table = facts.n, facts.causal, facts.skip, facts.table
        self.ids = torch.from_numpy(facts.ids).to(device)
        self.matched = torch.from_numpy(facts.matched).to(device)  # (matches, n)
        self.columns = torch.cat([torch.from_numpy(facts.masks).T, torch.ones(facts.n, 1)], 1).to(device)
        self.masks = facts.masks.shape[0]  # columns 0 … masks − 1: the key masks; then ones
        self.segment = None if facts.seg is None else torch.from_numpy(facts.seg).to(device)


class RowStats:
    """`heads` heads' (H,) sums (the table's row_sums) over the rows added so far; `finish` gives the measures."""

    def __init__(self, facts: TextFacts, heads: int, device) -> None:
        self.facts, self.device = _OnDevice(facts, device), device
        self._buffers: list[torch.Tensor | None] = [None, None]
        zeros = lambda: torch.zeros(heads, dtype=torch.float64, device=device)  # noqa: E731
        self.sums = {name: zeros() for name in facts.table.row_sums}
        self.sums["in_segment"] = (torch.full((heads,), float("inf"), dtype=torch.float64, device=device)
                                   if facts.seg is not None else zeros())

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
        wide = seen > 1  # masked by `where`, not by indexing: an index by a mask waits for the device
        s["norm_entropy"] += torch.where(wide, entropy / torch.log(seen.clamp_min(2)), 0.0).sum(-1)
        s["norm_rows"] += wide.sum()
        s["confidence"] += A.amax(-1).sum(-1, dtype=torch.float64)
        # the key masks, the row's sum, and (causal) Σ_j A_ij (start − j) in one product
        back = (start - cols).float()[:, None]  # (w, 1)
        sums = A @ torch.cat([f.columns[key_start:key_start + w], back], 1)  # (H, b, masks + 2)
        marked = sums.sum(1, dtype=torch.float64)  # (H, masks + 2)
        s["total"] += marked[:, f.masks]
        matches = self._matches(A, start, key_start, rows, cols)
        for r in f.table:
            if r.kind == "offset":
                s[r.name] += torch.diagonal(A, start - key_start + r.param, 1, 2).sum(-1, dtype=torch.float64)
            elif r.kind == "column":
                if 0 <= r.param - key_start < w:
                    s[r.name] += A[:, :, r.param - key_start].sum(-1, dtype=torch.float64)
            elif r.kind == "keys":
                s[r.name] += marked[:, f.table.key_masks.index(r)]
            elif r.kind == "distance":
                s[r.name] += self._distance(A, start, rows, cols, sums[..., f.masks:]).sum(-1)
            else:  # "match"
                s[r.name] += matches[:, f.table.matches.index(r.param)]
        self._beyond(A, start, key_start, rows, seen, valid, outside, sums[..., f.masks])
        return sums[..., f.masks]

    def _distance(self, A: torch.Tensor, start: int, rows: torch.Tensor, cols: torch.Tensor,
                  product: torch.Tensor) -> torch.Tensor:
        """(H, b) float64: Σ_j A_ij |i − j| of each row; product (H, b, 2): each row's sum and Σ_j A_ij (start − j)."""
        if self.facts.causal:  # Σ_j A_ij |i − j| = Σ_j A_ij (start − j) + (i − start) Σ_j A_ij
            return product[..., 1].double() + (rows - start).double() * product[..., 0].double()
        return (A * (rows[:, None] - cols[None, :]).abs().float()).sum(-1).double()

    def _matches(self, A: torch.Tensor, start: int, key_start: int, rows: torch.Tensor, cols: torch.Tensor
                 ) -> torch.Tensor:
        """(H, matches) float64: each match record's mass, on the keys j whose id m before (ids[j − m]) is the
        query's own and j − m < i: each row of A times its row of the masks (b, w, matches), one batched product."""
        f = self.facts
        if not f.table.matches:
            return torch.zeros((A.shape[0], 0), dtype=torch.float64, device=A.device)
        w = A.shape[2]
        own = f.ids[start:start + A.shape[1], None]
        masks = torch.stack([(own == f.matched[k, None, key_start:key_start + w]) & (cols[None, :] - m < rows[:, None])
                             for k, m in enumerate(f.table.matches)], -1).float()
        return torch.bmm(A.transpose(0, 1), masks).sum(0, dtype=torch.float64)  # (b, H, matches) -> (H, matches)

    def _beyond(self, A: torch.Tensor, start: int, key_start: int, rows: torch.Tensor, seen: torch.Tensor,
                valid: torch.Tensor | None, outside: int, mass: torch.Tensor) -> None:
        """Add the block's rows to the sink mass and the measures beyond the sink: the first `skip` keys are the
        sink (1, or 0 with the first token hidden), with what a row gave no key (a learned sink's share); a row
        that sees at least CHOICE_KEYS keys after them and keeps at least EMPTY_BELOW there is renormalised."""
        f, s = self.facts, self.sums
        skip = f.skip
        lost = torch.where(mass > 0, (1 - mass).clamp_min(0), torch.zeros((), device=A.device))  # a learned sink
        c0 = 1 if key_start == 0 and skip else 0  # the block's first key after the sink
        s["sink"] += ((A[:, :, 0] if c0 else 0) + lost).sum(-1, dtype=torch.float64)
        after = A[:, :, c0:]  # (H, b, w − c0)
        beyond = after.sum(-1)  # (H, b) float32
        kb = seen - skip  # keys beyond the sink each row may see
        kept = (beyond >= EMPTY_BELOW) & (rows >= skip) & (kb >= CHOICE_KEYS)
        inv = torch.where(kept, 1 / torch.where(kept, beyond, torch.ones((), device=A.device)),
                          torch.zeros((), device=A.device))
        floor = ENTROPY_SMOOTHING / kb.clamp_min(1)  # (b,) float64
        smooth = self._scratch(0, after.numel()).view(after.shape)
        base = floor[:, None].float() * valid[:, c0:] if valid is not None else floor[:, None].float()
        torch.add(base, after * inv[..., None], alpha=1 - ENTROPY_SMOOTHING, out=smooth).clamp_min_(1e-30)
        logs = self._scratch(1, after.numel()).view(after.shape)
        entropy = -torch.log(smooth, out=logs).mul_(smooth).sum(-1).double()  # (H, b)
        hidden = outside - (skip - c0)  # visible keys after the sink outside the block
        entropy -= hidden * floor * torch.log(floor)
        wide = kept & (kb > 1)
        s["beyond_norm_entropy"] += torch.where(wide, entropy / torch.log(kb.clamp_min(2)),
                                                torch.zeros((), dtype=torch.float64, device=A.device)).sum(-1)
        s["beyond_norm_rows"] += wide.sum(-1)
        s["beyond_rows"] += kept.sum(-1)
        marks = (after @ f.columns[key_start + c0:key_start + A.shape[2], :f.masks]) * inv[..., None]  # (H, b, masks)
        for r in f.table.beyond:
            if r.kind == "keys":
                s[f"beyond_{r.name}"] += marks[..., f.table.key_masks.index(r)].sum(-1, dtype=torch.float64)
                continue
            c = rows + r.param - key_start  # (b,) the key's place in the block
            ok = (c >= 0) & (c < A.shape[2]) & (rows + r.param >= skip) & (rows + r.param < f.n)
            at = A.gather(2, c.clamp(0, A.shape[2] - 1).expand(A.shape[0], -1)[..., None])[..., 0]  # (H, b)
            s[f"beyond_{r.name}"] += (at * inv * ok).sum(-1, dtype=torch.float64)
        if f.segment is not None:
            same = (f.segment[rows, None] == f.segment[None, key_start + c0:key_start + A.shape[2]]).float()
            own = torch.where(kept, (after * same).sum(-1) * inv, torch.full((), float("inf"), device=A.device))
            s["in_segment"] = torch.minimum(s["in_segment"], own.amin(-1).double())

    def finish(self) -> dict[str, np.ndarray]:
        """(H,) float64 arrays under the table's stat_names (`row_measures.measures_from_sums`)."""
        return measures_from_sums({name: v.cpu().numpy() for name, v in self.sums.items()}, self.facts.n,
                                  self.facts.table)


