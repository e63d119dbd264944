"""Device-to-host copies at the speed of the hardware: tensors computed on a GPU land in slices of
one host array through pinned staging buffers, while the GPU goes on computing.

A copy from a GPU into ordinary (pageable) host memory runs through a bounce buffer of the
driver's, at a few GiB/s; from pinned (page-locked) memory it runs at the bus's speed (measured
on an H200: 1.4–3 against 51 GiB/s, docs/speed.md). Pinning the destination itself costs more
than the copy (cudaHostAlloc ran at 2.5 GiB/s there), so a small set of pinned buffers is kept
per device and reused: each chunk goes GPU → pinned on a side stream while the previous chunk
goes pinned → the destination on the CPU, in a thread of its own, so the model's next layer
computes meanwhile. On the CPU a tensor is copied straight into its slice.
"""

from __future__ import annotations

import queue
import threading

import numpy as np
import torch

from mha_viz.budget.memory import PENDING, STACK_BYTES

CHUNK_BYTES = 32 * 2**20  # per staging buffer: long enough to amortise a chunk's bookkeeping
BUFFERS = 2  # one filling from the GPU while the other drains to the host


class Staging:
    """Everything of a copy that needs CUDA, for one device: pinned buffers, their events and a
    copy stream; used by one copy at a time. `HostCopier` reaches CUDA only through these methods,
    so its chunking, buffer rotation and error handling run with another class of the same methods
    (tests/unit/test_transfer.py's, on the CPU)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device=device)
        n = CHUNK_BYTES // 4
        self.buffers = [torch.empty(n, dtype=torch.float32, pin_memory=True) for _ in range(BUFFERS)]
        self.events = [torch.cuda.Event(blocking=True) for _ in range(BUFFERS)]  # a wait sleeps, not spins

    @staticmethod
    def stages(device: torch.device) -> bool:
        """Whether a tensor on `device` goes through staging (else it is copied straight)."""
        return device.type == "cuda"

    @staticmethod
    def ready(src: torch.Tensor):
        """A mark that `src` has been computed, recorded on the stream computing it."""
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(src.device))
        return event

    @classmethod
    def take(cls, device: torch.device) -> "Staging":
        """A set for `device` from the pool (pinned once, kept: later copies reuse it)."""
        with _POOL_LOCK:
            free = _POOL.setdefault(str(device), [])
            if free:
                return free.pop()
        return cls(device)

    def give_back(self) -> None:
        with _POOL_LOCK:
            _POOL.setdefault(str(self.device), []).append(self)

    def keep(self, src: torch.Tensor) -> None:
        """`src`'s memory is not reused before the copy stream has read it, whenever it is dropped."""
        src.record_stream(self.stream)

    def scope(self):
        """The context the copying thread runs in."""
        return torch.cuda.device(self.device)

    def wait(self, ready) -> None:
        """Sends after this wait for the mark `ready` (`Staging.ready`)."""
        self.stream.wait_event(ready)

    def send(self, b: int, chunk: torch.Tensor) -> None:
        """Start copying `chunk` into buffer b on the copy stream (returns at once)."""
        with torch.cuda.stream(self.stream):
            self.buffers[b][:chunk.numel()].copy_(chunk, non_blocking=True)
            self.events[b].record(self.stream)

    def receive(self, b: int, dst: torch.Tensor) -> None:
        """Buffer b, once its chunk has arrived, into the host slice `dst` (as long as the chunk)."""
        self.events[b].synchronize()
        dst.copy_(self.buffers[b][:dst.numel()])


_POOL: dict[str, list[Staging]] = {}  # device -> staging sets not in use
_POOL_LOCK = threading.Lock()  # sessions are threads of one process: each copy takes its own set


class HostCopier:
    """Copies tensors into `dest[index]` (a C-contiguous float32 host array); see module doc.

    Use as a context manager, or call `finish()`: only then is every copy complete. `put` returns
    at once for a GPU tensor (after at most PENDING tensors wait) and the tensor may be dropped by
    the caller; the copier keeps it until its bytes have left the GPU. `staging`: the class of
    the staging sets (`Staging`, CUDA's; another one runs the copier's logic without a GPU).
    """

    def __init__(self, dest: np.ndarray, staging: type[Staging] = Staging) -> None:
        if dest.dtype != np.float32 or not dest.flags.c_contiguous:
            raise ValueError("HostCopier writes into a C-contiguous float32 array")
        self.dest = dest
        self._kind = staging
        self._jobs: queue.Queue | None = None
        self._worker: threading.Thread | None = None
        self._error: BaseException | None = None
        self._staging: Staging | None = None

    def __enter__(self) -> "HostCopier":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finish(raise_error=exc_type is None)

    def put(self, index, tensor: torch.Tensor) -> None:
        """Copy `tensor` (any device, any float dtype; widened to float32) into `dest[index]`."""
        target = self.dest[index]
        if tuple(target.shape) != tuple(tensor.shape) or not target.flags.c_contiguous:
            raise ValueError(f"a tensor of shape {tuple(tensor.shape)} for a slice of shape {target.shape}")
        if not self._kind.stages(tensor.device):
            torch.from_numpy(target).copy_(tensor.detach())  # a view: writes dest
            return
        if self._error is not None:
            raise self._error
        src = tensor.detach().to(torch.float32).contiguous().view(-1)  # on the compute stream
        ready = self._kind.ready(src)
        if self._staging is not None and self._staging.device != src.device:  # a model spread over GPUs:
            self.finish()  # this GPU's copies done, the next one's through a staging set of its own
        if self._worker is None:
            self._staging = self._kind.take(src.device)
            self._jobs = queue.Queue(maxsize=PENDING)
            self._worker = threading.Thread(target=self._drain, name="mha-viz-host-copy", daemon=True)
            self._worker.start()
        self._staging.keep(src)  # read on the side stream: not reused before that read
        self._jobs.put((src, torch.from_numpy(target).view(-1), ready))

    def finish(self, raise_error: bool = True) -> None:
        """Wait for every copy; re-raises an error the copying thread met."""
        if self._worker is not None:
            self._jobs.put(None)
            self._worker.join()
            self._worker, self._jobs = None, None
            self._staging.give_back()
            self._staging = None
        if self._error is not None and raise_error:
            raise self._error

    def _drain(self) -> None:
        """The copying thread: chunk i goes GPU → pinned buffer i % 2 on the side stream while
        chunk i - 1 goes pinned → host here; a buffer is refilled only after it was drained."""
        st = self._staging
        pending = None  # (buffer, host slice) of the chunk on its way to the host
        turn, done = 0, False
        try:
            # Inference mode is a thread's own: the host slices and pooled buffers this thread writes were made
            # in the caller's, so they are inference tensors, written in place only inside inference mode.
            with st.scope(), torch.inference_mode():
                while (job := self._jobs.get()) is not None:
                    src, dst, ready = job
                    st.wait(ready)
                    step = min(st.buffers[0].numel(), CHUNK_BYTES // 4)  # (a pooled set may be larger)
                    for start in range(0, src.numel(), step):
                        m = min(step, src.numel() - start)
                        b = turn % len(st.buffers)
                        turn += 1
                        st.send(b, src[start:start + m])
                        if pending is not None:
                            self._land(*pending)
                        pending = (b, dst[start:start + m])
                    del src, job  # record_stream keeps its memory until the side stream has read it
                done = True
                if pending is not None:
                    self._land(*pending)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by finish()
            self._error = exc
            while not done and self._jobs.get() is not None:  # let put() return until finish()'s None
                pass

    def _land(self, b: int, dst: torch.Tensor) -> None:
        """Pinned buffer b, once its chunk has arrived, into its host slice `dst`."""
        self._staging.receive(b, dst)


def to_host(tensors, dest: np.ndarray | None = None) -> np.ndarray:
    """Stack equal-shaped tensors (any device) into one float32 host array (or into `dest`). A
    small set on a GPU is stacked there first: one transfer instead of a hand-off per tensor to
    the copying thread (BERT-base at 512 tokens: 12 layers of 12 MiB)."""
    if dest is None:
        tensors = list(tensors)
        dest = np.empty((len(tensors), *tensors[0].shape), dtype=np.float32)
    if dest.nbytes <= STACK_BYTES:
        tensors = list(tensors)
        devices = {t.device for t in tensors}
        if len(devices) == 1 and next(iter(devices)).type == "cuda":  # one GPU (a spread model's are not stacked)
            whole = torch.stack([t.detach().to(torch.float32) for t in tensors])  # (len, ...) on the GPU
            with HostCopier(dest[None]) as copier:
                copier.put(0, whole)
            return dest
    with HostCopier(dest) as copier:  # one at a time: a generator's tensors are made as they are sent
        for i, t in enumerate(tensors):
            copier.put(i, t)
    return dest
