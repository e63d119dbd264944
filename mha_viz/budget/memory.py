"""How many bytes a computation may take, and how many one analysis needs, before it runs.

The room (`room`): MHA_VIZ_MAX_CAPTURE_MB of attention, the host's available memory
(MemAvailable in /proc/meminfo) and, for a model on CUDA, the GPU's free memory (free on the
card plus what PyTorch's caching allocator holds reserved but unused). The need (`analysis_need`) is the
one place the estimate of an analysis is written. `shortfall` says which memory is short and by
how much; `free_cache` gives memory back after an out-of-memory error.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch

from mha_viz import settings
from mha_viz.budget.capture_budget import capture_budget, over_budget
from mha_viz_models import LoadedModel

HOST = "host"  # the place of host memory in `Need.places` (a GPU's place is its device, "cuda:0")
# what a capture from a GPU keeps in flight (`mha_viz.capture.transfer`, which reads these): tensors waiting for
# the copier (PENDING); with the one it copies and the one being made, a GPU holds at most IN_FLIGHT of them
PENDING = 1
IN_FLIGHT = PENDING + 2
STACK_BYTES = 256 * 2**20  # up to this much, GPU tensors are stacked there and cross in one transfer

LEAN_ABOVE_BYTES = 2**30  # SmolLM2 at 2,048 tokens: 4.5 GB once instead of 9 GB at the peak


def chooses_lean(model: LoadedModel, n: int, layers: int | None = None) -> bool:
    """Whether `capture_text` captures n tokens (`layers` of the model's layers; None: every layer) the
    lean way by default: fused forward, each layer recomputed. Measured: on the CPU lean is 5-40 %
    slower for a full capture, but holds half the memory; on a GPU it holds a few layers'
    probabilities instead of every layer's (an H200: as fast as eager at 2,048 tokens, 1.4 × slower
    for BERT-base at 512). `mha_viz.budget.memory` estimates an analysis by the same rule."""
    kept = model.num_layers if layers is None else layers
    return model.can_recompute and (
        kept < model.num_layers or model.attention_bytes(n, layers=kept) > LEAN_ABOVE_BYTES)


OUT_OF_MEMORY_ADVICE = ("Lower the token limit in the sidebar, capture fewer layers, pick a lower precision "
                        "or a smaller model.")


@dataclass(frozen=True)
class Need:
    """Bytes one computation holds at its peak: `host` in the host's memory and `gpu` on the
    CUDA device `device` ("" for a model on the CPU, whose working memory is in `host`);
    `attention`, the part of `host` that is attention probabilities (what
    MHA_VIZ_MAX_CAPTURE_MB limits)."""

    host: int
    gpu: int = 0
    device: str = ""
    attention: int = 0

    def places(self) -> dict[str, int]:
        """{place: bytes}: HOST, and the CUDA device when there is one."""
        return {HOST: self.host, self.device: self.gpu} if self.device else {HOST: self.host}


@dataclass(frozen=True)
class Room:
    """Bytes one computation may take: `capture` of attention (MHA_VIZ_MAX_CAPTURE_MB), `host`
    in all of the host's memory, and `gpu` on the CUDA device `device` (0 and "" for the CPU)."""

    capture: int
    host: int
    gpu: int = 0
    device: str = ""


def cuda_place(device) -> str:
    """"cuda:0" for a CUDA device (an index is filled in), "" for any other."""
    device = torch.device(device)
    if device.type != "cuda":
        return ""
    return f"cuda:{torch.cuda.current_device() if device.index is None else device.index}"


def host_available() -> int:
    """Bytes the host can give without swapping: MemAvailable of /proc/meminfo (Linux), else
    the physical pages free (other systems)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**63  # unknown: the setting decides


def gpu_free(device) -> int:
    """Bytes free on the CUDA device: free on the card, plus what PyTorch's caching allocator
    holds reserved but unused (this process can reuse it without asking the driver)."""
    free, _total = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


def budget(place: str) -> int:
    """Bytes the computations running at once may share at `place` (HOST or "cuda:0"), read now:
    the host's available memory, or the GPU's free memory capped by MHA_VIZ_GPU_BUDGET_MB."""
    if place == HOST:
        return host_available()
    free = gpu_free(place)
    cap = settings.from_env().gpu_budget_bytes
    return min(free, cap) if cap else free


def room(device, *, read=budget) -> Room:
    """Bytes one computation on `device` (a torch device or its name) may take: `read(place)`
    of each place (default: what is free now)."""
    place = cuda_place(device)
    return Room(capture=capture_budget(), host=read(HOST),
                gpu=read(place) if place else 0, device=place)


def logits_width(model: LoadedModel) -> int:
    """How many logits a forward pass makes a position: the vocabulary's size, or 0 for a model
    without a language-model head (an embedding model such as MiniLM makes none)."""
    hf = getattr(model, "hf_model", None)
    vocab = int(getattr(getattr(hf, "config", None), "vocab_size", 0) or 0)
    head = getattr(hf, "get_output_embeddings", None)
    return vocab if head is None or head() is not None else 0


def run_bytes(model: LoadedModel, n: int, *, layers: int | None = None) -> int:
    """Bytes an analysis's run of n tokens keeps (float32): its probabilities, each head's output z
    and the value norms of `layers` layers (default: every layer)."""
    kept = model.num_layers if layers is None else layers
    return 4 * kept * model.num_heads * (n * n + n * model.d_k + n)


def analysis_need(model: LoadedModel, n: int, *, layers: int | None = None) -> Need:
    """Bytes one analysis (`mha_viz.analyze`) of n tokens capturing `layers` layers (default:
    every layer) holds at its peak, all in float32 (a lower precision needs less).

    The host keeps what the run holds: the probabilities (layers · H · n²), each head's output
    z (layers · H · n · d_k) and the value norms (layers · H · n). The device holds, besides the
    weights already loaded: the recorded layer inputs and head outputs of every layer
    (2 · L · n · d_model), one layer's working activations (q, k, v and the MLP's wider hidden
    layer, about 8 · n · d_model), the logits (n · `logits_width`), and the probabilities: of a few
    layers at a time in a lean capture (`IN_FLIGHT`: one being made, one waiting, one on
    its way to the host through pinned buffers), of every layer in an eager one (the model returns
    them whole; `chooses_lean` decides, as `analyze` does), plus their stack on a GPU when
    it is sent in one transfer (`STACK_BYTES`). An eager capture also holds every layer's
    hidden state and values (2 · L · n · d_model more) and, in the layer running, its scores on
    their way to the softmax (3 · H · n²).
    A model on the CPU holds both parts in the host's memory. Measured against the peak resident
    size (tests/models/test_memory_peak.py; `benchmarks/memory_peak.py` prints more sizes).
    """
    L, H, d = model.num_layers, model.num_heads, model.d_model
    kept = L if layers is None else layers
    host = run_bytes(model, n, layers=layers)
    attention = 4 * kept * H * n * n
    place = cuda_place(model.device)
    lean = chooses_lean(model, n, kept)
    probs = 4 * min(L, IN_FLIGHT) * H * n * n if lean else 4 * L * H * n * n
    if not lean:
        probs += 4 * (2 * L * n * d + 3 * H * n * n)  # hidden states and values; the running layer's scores
    if not lean and place and attention <= STACK_BYTES:
        probs += attention  # stacked on the GPU for one transfer
    work = probs + 4 * (2 * L * n * d + 8 * n * d + n * logits_width(model))
    if place:
        return Need(host=host, gpu=work, device=place, attention=attention)
    return Need(host=host + work, attention=attention)


def fits(need: Need, room: Room) -> bool:
    """Whether `need` fits `room`: its attention, the host's memory and, on CUDA, the GPU's."""
    return not shortfall(need, room)


def shortfall(need: Need, room: Room) -> str:
    """What `need` lacks in `room`, as what it "would hold": "about 5.0 GiB of GPU memory
    (cuda:0), 1.0 GiB more than the 4.0 GiB free there for analyses" ("" when it fits). The
    setting is named first (`capture_budget.over_budget`), then the GPU, then the host's memory."""
    size = settings.size_text
    if need.attention > room.capture:
        return over_budget(need.attention, room.capture)
    if need.device and need.gpu > room.gpu:
        return (f"about {size(need.gpu)} of GPU memory ({need.device}), {size(need.gpu - room.gpu)} more than "
                f"the {size(room.gpu)} free there for analyses")
    if need.host > room.host:
        return (f"about {size(need.host)} of memory, {size(need.host - room.host)} more than the "
                f"{size(room.host)} this machine has available")
    return ""


def layers_that_fit(model: LoadedModel, n: int, room: Room) -> int:
    """The most layers an analysis of n tokens may capture within `room` (0: not even one)."""
    return max((k for k in range(1, model.num_layers + 1) if fits(analysis_need(model, n, layers=k), room)), default=0)


def free_cache() -> None:
    """Give memory back after an out-of-memory error: collect what the failed computation left
    unreferenced, then return PyTorch's cached GPU blocks to the driver (when CUDA is in use)."""
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
