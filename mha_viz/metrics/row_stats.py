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
from mha_viz.metrics.row_measures import ROW_SUMS, TextFacts, measures_from_sums


class _OnDevice:
    """TextFacts' arrays as tensors on a device: ids, the previous token's, the columns [SEP]-like,
    punctuation and ones (one product gives the three sums), the segments."""

    def __init__(self, facts: TextFacts, device) -> None:
        self.n, self.causal, self.skip = facts.n, facts.causal, facts.skip
        self.ids = torch.from_numpy(facts.ids).to(device)
        self.before = torch.from_numpy(facts.before).to(device)
        self.columns = torch.stack([torch.from_numpy(facts.sep), torch.from_numpy(facts.punct),
                                    torch.ones(facts.n)], 1).to(device)
        self.segment = None if facts.seg is None else torch.from_numpy(facts.seg).to(device)


class RowStats:
    """`heads` heads' (H,) sums (ROW_SUMS) over the rows added so far; `finish` gives the measures."""

    def __init__(self, facts: TextFacts, heads: int, device) -> None:
        self.facts, self.device = _OnDevice(facts, device), device
        self._buffers: list[torch.Tensor | None] = [None, None]
        zeros = lambda: torch.zeros(heads, dtype=torch.float64, device=device)  # noqa: E731
        self.sums = {name: zeros() for name in ROW_SUMS}
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
        # the mass on keys holding the query's token (before it), and on keys after one (P[i, j+1]: tok_j = tok_i,
        # j < i): each row of A times its row of the two masks (b, w, 2), one batched product over the rows
        own = f.ids[start:start + b, None]
        matches = torch.stack([(own == f.ids[None, key_start:key_start + w]) & (cols[None, :] < rows[:, None]),
                               (own == f.before[None, key_start:key_start + w]) & (cols[None, :] <= rows[:, None])],
                              -1).float()
        scores = torch.bmm(A.transpose(0, 1), matches).sum(0, dtype=torch.float64)  # (b, H, 2) -> (H, 2)
        s["duplicate_score"] += scores[:, 0]
        s["induction_score"] += scores[:, 1]
        self._beyond(A, start, key_start, rows, seen, valid, outside, sums[..., 2])
        return sums[..., 2]

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
        for name, shift in (("beyond_self", 0), ("beyond_prev", -1), ("beyond_next", 1)):
            c = rows + shift - key_start  # (b,) the key's place in the block
            ok = (c >= 0) & (c < A.shape[2]) & (rows + shift >= skip) & (rows + shift < f.n)
            at = A.gather(2, c.clamp(0, A.shape[2] - 1).expand(A.shape[0], -1)[..., None])[..., 0]  # (H, b)
            s[name] += (at * inv * ok).sum(-1, dtype=torch.float64)
        marks = (after @ f.columns[key_start + c0:key_start + A.shape[2], :2]) * inv[..., None]  # (H, b, 2)
        s["beyond_sep"] += marks[..., 0].sum(-1, dtype=torch.float64)
        s["beyond_punct"] += marks[..., 1].sum(-1, dtype=torch.float64)
        if f.segment is not None:
            same = (f.segment[rows, None] == f.segment[None, key_start + c0:key_start + A.shape[2]]).float()
            own = torch.where(kept, (after * same).sum(-1) * inv, torch.full((), float("inf"), device=A.device))
            s["in_segment"] = torch.minimum(s["in_segment"], own.amin(-1).double())

    def finish(self) -> dict[str, np.ndarray]:
        """(H,) float64 arrays under STAT_NAMES (`row_measures.measures_from_sums`)."""
        return measures_from_sums({name: v.cpu().numpy() for name, v in self.sums.items()}, self.facts.n)


