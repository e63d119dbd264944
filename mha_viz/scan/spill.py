"""Each attention layer's queries, keys, values and input, kept as a long text runs through the model
(`QKSpill`): what a view's exact rows, a head's outputs and the teaching walkthrough are recomputed from,
with no second forward pass."""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from mha_viz_models.attention.heads import kv_head

Place = tuple[int, torch.dtype, tuple[int, ...]]  # (offset in the file, dtype, shape)
PARTS = ("q", "k", "v", "x")  # queries, keys (RoPE applied), values, the layer's input
# Writes the spills' files while the scan computes the layer's blocks (the page cache's copy of SmolLM2's 50 MB a layer
# at 8,192 tokens took 1.8 s of 52 with both cores but one idle); one thread for every spill of the process.
WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mha-viz-spill")
WRITING = 2  # layers a spill has waiting to be written at most: `put` waits for the oldest beyond


class QKSpill:
    """Each layer's queries and keys (RoPE applied: what its exact rows are recomputed from), and where given its
    values and its input, kept as the model runs. Up to `keep_bytes` (a GPU's free memory: `rows.device_room`)
    they stay on the device that computed them, so a view's rows are recomputed there with no copy; the rest are
    written to an anonymous temporary file and read back one layer at a time: a long text's (SmolLM2 at 8,192
    tokens: 50 MB a layer with its values and input) stay out of the process's memory, and a view's rows cost no
    projection. The file goes when the spill does."""

    def __init__(self, keep_bytes: int = 0) -> None:
        self.file = tempfile.TemporaryFile(prefix="mha-viz-scan-")
        self.end = 0  # where the next bytes go (reads use os.pread: no shared file position)
        self.where: dict[int, dict[str, Place]] = {}  # layer -> each part's place in the file
        self.keep_bytes = int(keep_bytes)
        self.kept: dict[int, dict[str, torch.Tensor]] = {}  # layer -> its parts, where they were made
        self.kept_bytes = 0
        self.rotated: set[int] = set()  # the layers whose q and k were handed RoPE's angles
        self.writing: dict[int, Future] = {}  # layer -> its write (`WRITER`), until it is read or waited for

    def _write(self, t: torch.Tensor) -> Place:
        t = t.detach()
        raw = memoryview(t.cpu().contiguous().view(torch.uint8).numpy().reshape(-1))  # the bytes, any dtype
        done = 0
        while done < len(raw):  # a write may take fewer bytes than given (2 GiB at most on Linux)
            done += os.pwrite(self.file.fileno(), raw[done:], self.end + done)
        place = (self.end, t.dtype, tuple(t.shape))
        self.end += len(raw)
        return place

    def _fill(self, out: torch.Tensor, offset: int) -> None:
        """Read the file's bytes from `offset` straight into `out` (a contiguous CPU tensor): os.preadv, safe from
        several threads at once (no shared file position), no copy of its own."""
        raw = memoryview(out.view(-1).view(torch.uint8).numpy())
        done = 0
        while done < len(raw):  # a read may give fewer bytes than asked
            got = os.preadv(self.file.fileno(), [raw[done:]], offset + done)
            if got <= 0:
                raise OSError(f"the scan's spill file ended {len(raw) - done} bytes early")
            done += got

    def _read(self, place: Place, device, heads: list[int] | None = None,
              rows: tuple[int, int] | None = None) -> torch.Tensor:
        """A part as written, or (a (1, h, n, d) part) only rows start … stop − 1 of `heads` (None: every head):
        one read a head."""
        offset, dtype, shape = place
        if heads is None and rows is None:
            out = torch.empty(shape, dtype=dtype)
            self._fill(out, offset)
            return out.to(device)
        _, h, n, d = shape
        which = list(range(h)) if heads is None else list(heads)
        start, stop = (0, n) if rows is None else rows
        out = torch.empty((1, len(which), stop - start, d), dtype=dtype)
        size = out.element_size()
        for i, head in enumerate(which):
            self._fill(out[0, i], offset + (head * n + start) * d * size)
        return out.to(device)

    def put(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor | None = None,
            x: torch.Tensor | None = None) -> None:
        """Keep layer `layer`'s q (1, H, n, d_k) and k (1, G, n, d_k) and, given, its values v (1, G, n, d_v): what
        its heads' outputs are recomputed from (`RowSource.outputs`), and its input x (1, n, d_model) (after the
        layer norm of a pre-LN model: what the projections read; the teaching walkthrough's first step)."""
        parts = {name: t.detach() for name, t in zip(PARTS, (q, k, v, x)) if t is not None}
        size = sum(t.numel() * t.element_size() for t in parts.values())
        if self.kept_bytes + size <= self.keep_bytes:
            self.kept[layer] = parts
            self.kept_bytes += size
            return
        self.writing[layer] = WRITER.submit(self._store, layer, parts)  # the model makes new tensors, never
        # writes into these, so they are written as they are now
        for older in sorted(self.writing)[:-WRITING]:
            self.written(older)

    def _store(self, layer: int, parts: dict[str, torch.Tensor]) -> None:
        self.where[layer] = {name: self._write(t) for name, t in parts.items()}

    def written(self, layer: int | None = None) -> None:
        """Wait until layer `layer`'s parts (None: every layer's) are in the file, raising what their write raised."""
        for at in sorted(self.writing) if layer is None else [layer]:
            job = self.writing.get(at)
            if job is not None:
                job.result()
                self.writing.pop(at, None)

    def part(self, layer: int, name: str, device) -> torch.Tensor | None:
        """One part ("q", "k", "v" or "x") of layer `layer` on `device` (no copy when it stayed there), or None
        where it was not kept."""
        if layer in self.kept:
            t = self.kept[layer].get(name)
            return None if t is None else t.to(device)
        self.written(layer)
        place = self.where[layer].get(name)
        return None if place is None else self._read(place, device)

    def get(self, layer: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """(q, k) of layer `layer`, on `device`."""
        return self.part(layer, "q", device), self.part(layer, "k", device)

    def rows(self, layer: int, device, heads: list[int] | None, queries: tuple[int, int],
             keys: int) -> tuple[torch.Tensor, torch.Tensor]:
        """What rows queries[0] … queries[1] − 1 of `heads` (None: every head) of layer `layer` are recomputed from,
        on `device`: q (1, h, rows, d_k) of those heads and rows alone, and k (1, ·, keys, d_k) of the first `keys`
        keys, one a query head (query head h reads KV head h // (H / G)) or, for every head, the layer's G. Of a
        layer in the file only those bytes are read: a token's row of every layer of SmolLM2 at 8,192 tokens reads
        each layer's keys (6 MB) and one query row, not its 19 MB of queries too."""
        if layer in self.kept:
            q, k = self.kept[layer]["q"], self.kept[layer]["k"]
            if heads is not None:
                q, k = q[:, heads], k[:, [kv_head(h, q.shape[1], k.shape[1]) for h in heads]]
            return q[:, :, queries[0]:queries[1]].to(device), k[:, :, :keys].to(device)
        self.written(layer)
        places = self.where[layer]
        q_heads, groups = places["q"][2][1], places["k"][2][1]
        kv = None if heads is None else [kv_head(h, q_heads, groups) for h in heads]
        unique = None if kv is None else sorted(set(kv))
        k = self._read(places["k"], device, unique, (0, keys))
        if unique is not None:
            k = k[:, [unique.index(g) for g in kv]]
        return self._read(places["q"], device, heads, queries), k

    def values(self, layer: int, device) -> torch.Tensor | None:
        """Layer `layer`'s values (1, G, n, d_v) on `device`, or None where they were not kept."""
        return self.part(layer, "v", device)
