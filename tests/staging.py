"""A stand-in for CUDA's staging set (`capture.transfer.Staging`) on the CPU: the pinned copier's logic runs
through it without a GPU (tests/unit/test_transfer.py, and a long run's rows leaving its device)."""

from __future__ import annotations

import contextlib
import itertools

import torch

from mha_viz.capture import transfer

CHUNK = 1000  # elements per chunk (CHUNK_BYTES is set to 4 × this): tensors of 12,345 make 13 chunks


class CpuStaging:
    """A staging set on the CPU: `send` copies into a buffer at once, `receive` from it. It refuses
    to fill a buffer that was not received since, or to receive one that was not filled, and keeps
    a log of ("wait", mark) / ("send", buffer, first value, length) / ("receive", buffer, first
    value, length); sources are aranges, so a chunk's first value is where it starts."""

    buffers_per_set = transfer.BUFFERS
    fail_at: int | None = None  # the call (send or receive, counted from 0) that raises, if any

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.buffers = [torch.full((CHUNK,), float("nan")) for _ in range(self.buffers_per_set)]
        self.full = [False] * self.buffers_per_set
        self.log: list[tuple] = []
        self.calls = itertools.count()
        self.given_back = False

    @staticmethod
    def stages(device: torch.device) -> bool:
        return True  # every tensor goes through the staging path

    @staticmethod
    def ready(src: torch.Tensor):
        return ("computed", float(src[0]))

    @classmethod
    def take(cls, device: torch.device) -> "CpuStaging":
        cls.sets.append(cls(device))
        return cls.sets[-1]

    def give_back(self) -> None:
        self.given_back = True

    def keep(self, src: torch.Tensor) -> None:
        pass

    def scope(self):
        return contextlib.nullcontext()

    def wait(self, ready) -> None:
        self.log.append(("wait", ready))

    def _call(self) -> None:
        if next(self.calls) == self.fail_at:
            raise RuntimeError("the device copy failed")

    def send(self, b: int, chunk: torch.Tensor) -> None:
        self._call()
        assert not self.full[b], f"buffer {b} refilled before it was received"
        assert chunk.numel() <= self.buffers[b].numel()
        self.buffers[b][:chunk.numel()].copy_(chunk)
        self.full[b] = True
        self.log.append(("send", b, float(chunk[0]), chunk.numel()))

    def receive(self, b: int, dst: torch.Tensor) -> None:
        self._call()
        assert self.full[b], f"buffer {b} received before it was filled"
        dst.copy_(self.buffers[b][:dst.numel()])
        self.full[b] = False
        self.log.append(("receive", b, float(dst[0]), dst.numel()))
