"""Deployment settings, read from environment variables (documented in docs/deploying.md).

Local use needs none of them. A public server sets MHA_VIZ_PUBLIC=1, which closes the model
picker to an allow-list and caps what one request may cost:

- MHA_VIZ_PUBLIC: 1 = public mode (default 0).
- MHA_VIZ_MODELS: comma-separated models offered (bundled names or hub ids). Public mode
  offers only these (default: the bundled models) and no free-form hub id or folder.
- MHA_VIZ_MAX_TOKENS: default token limit (locally the model's whole context, up to 32,768; in public
  mode 512); in public mode also the most a user may set,
  on every page and button (`mha_viz.text.tokenize` enforces it).
- MHA_VIZ_MAX_OVERVIEW_TOKENS: in public mode, the most tokens `mha_viz.scan` reads when called
  without `max_tokens` (the Python API; default: MHA_VIZ_MAX_TOKENS, so it goes no further than the
  app's pages); locally it reads the model's whole context.
- MHA_VIZ_MAX_CAPTURE_MB: most MiB of probabilities one analysis may hold (4096).
- MHA_VIZ_DENSE_MB: the largest every-head array (layers × heads × n × n float32s, in MiB) an
  analysis builds at once (1024); above it the run keeps each layer's input and recomputes the
  rows a view draws (`AttentionRun.rows`), and the whole array is built only when asked for
  (`AttentionRun.attentions`), within MHA_VIZ_MAX_CAPTURE_MB.
- MHA_VIZ_MAX_CONCURRENT: analyses (model loads and captures) running at once; others wait
  with a notice (default 2 in public mode, unlimited otherwise).
- MHA_VIZ_GPU_BUDGET_MB: most MiB of GPU memory the analyses running at once may share
  (default 0: what is free on the card when none runs); see `mha_viz.budget.admission`.
- MHA_VIZ_MAX_CORPUS_DOCS / MHA_VIZ_MAX_CORPUS_MB: the most documents, and MiB, a corpus
  uploaded to the Corpus page may have (public mode: 2,000 and 5; locally 100,000 and 200).
- MHA_VIZ_DTYPE: the sidebar's default *Precision* (auto, float32, bfloat16, float16; default
  auto: the checkpoint's own, the bundled models float32); `mha-viz --dtype` sets it.
- MHA_VIZ_LESSON: the path of a lesson file (`mha_viz.export.lesson`) or the name of a bundled
  lesson: every session opens on its first step. With MHA_VIZ_PUBLIC=1 the server is a workshop:
  it offers only the lesson's models and pages.
- MHA_VIZ_ALLOW_PICKLE: 1 = also load pickled `.bin` weights from a folder (local use only,
  ignored in public mode); by default only safetensors and GGUF are read.
- MHA_VIZ_MAX_MODELS: models kept loaded at once, for all sessions (default 3); a load past it
  unloads the one used least recently.
- MHA_VIZ_AHEAD: 0 = a model's composition and copying scores are computed when a page first asks
  for them, not in the background once a page is drawn (default 1: seconds of one core a model
  load, SmolLM2 about 3.5 s on 2 idle cores; `mha_viz.circuits.ahead`).
- MHA_VIZ_KEEP_SCORES: 0 = a model's composition and copying scores are not kept on disk (default 1: kept under
  the cache folder, keyed by a hash of the weights, where computing them costs more than reading them back;
  `mha_viz.circuits.kept`).
- MHA_VIZ_SCAN_KERNEL: 1 = on a GPU with Triton, a long run takes each layer through the attention kernel
  (`metrics.row_triton`) instead of blocks of rows (default 0: on one H200 the kernel was slower, docs/speed.md).

Rules that no setting changes: models are never loaded with remote code, and user text never
reaches raw HTML.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from mha_viz_models import BUNDLED, PRECISIONS

UNLIMITED = 0


def _flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name, "").strip().lower()
    return default if not value else value in ("1", "true", "yes", "on")


def _int(name: str, default: int, low: int) -> int:
    try:
        return max(low, int(os.environ.get(name, str(default))))
    except ValueError:
        return default


WHOLE_CONTEXT = 32768  # the local default token limit: every model reads its whole context (the sidebar's most)
PUBLIC_TOKENS = 512  # a public server's default


@dataclass(frozen=True)
class Settings:
    public: bool = False
    models: tuple[str, ...] = ()  # empty: any model (local use)
    max_tokens: int = 512
    max_overview_tokens: int = 0  # 0: the model's whole context (local use)
    max_capture_mb: int = 4096
    dense_mb: int = 1024
    max_concurrent: int = UNLIMITED
    gpu_budget_mb: int = 0  # 0: what is free on the card when no analysis runs
    allow_pickle: bool = False
    max_corpus_docs: int = 100_000
    max_corpus_mb: int = 200
    dtype: str = "auto"  # the sidebar's default precision
    lesson: str = ""  # a lesson file's path or a bundled lesson's name: every session opens on it
    max_models: int = 3  # models kept loaded at once (`budget.model_cache`)
    ahead: bool = True  # weights-only results computed in the background once a page is drawn (`circuits.ahead`)
    keep_scores: bool = True  # weights-only scores kept on disk across processes (`circuits.kept`)
    scan_kernel: bool = False  # a long run on a GPU through the attention kernel (`scan.kernel_layer`)

    def allows(self, spec: str) -> bool:
        """Whether `spec` (a bundled name, hub id or folder) may be loaded."""
        return not self.models or spec.strip() in self.models

    @property
    def max_capture_bytes(self) -> int:
        """Most bytes one analysis (a capture, or a gradient pass) may hold."""
        return self.max_capture_mb * 2**20

    @property
    def dense_bytes(self) -> int:
        """Most bytes of every head's probabilities an analysis builds at once (`AttentionRun.rows`)."""
        return self.dense_mb * 2**20

    @property
    def gpu_budget_bytes(self) -> int:
        """Most bytes of GPU memory the analyses running at once may share (0: no setting)."""
        return self.gpu_budget_mb * 2**20


def from_env() -> Settings:
    public = _flag("MHA_VIZ_PUBLIC")
    listed = tuple(m.strip() for m in os.environ.get("MHA_VIZ_MODELS", "").split(",") if m.strip())
    if public and not listed:
        listed = tuple(BUNDLED)
    max_tokens = _int("MHA_VIZ_MAX_TOKENS", PUBLIC_TOKENS if public else WHOLE_CONTEXT, 2)
    return Settings(
        public=public,
        models=listed,
        max_tokens=max_tokens,
        max_overview_tokens=_int("MHA_VIZ_MAX_OVERVIEW_TOKENS", max_tokens, 2) if public else 0,
        max_capture_mb=_int("MHA_VIZ_MAX_CAPTURE_MB", 4096, 1),
        dense_mb=_int("MHA_VIZ_DENSE_MB", 1024, 0),
        max_concurrent=_int("MHA_VIZ_MAX_CONCURRENT", 2 if public else UNLIMITED, 0),
        gpu_budget_mb=_int("MHA_VIZ_GPU_BUDGET_MB", 0, 0),
        allow_pickle=_flag("MHA_VIZ_ALLOW_PICKLE") and not public,
        max_corpus_docs=_int("MHA_VIZ_MAX_CORPUS_DOCS", 2_000 if public else 100_000, 1),
        max_corpus_mb=_int("MHA_VIZ_MAX_CORPUS_MB", 5 if public else 200, 1),
        dtype=_choice("MHA_VIZ_DTYPE", PRECISIONS),
        lesson=os.environ.get("MHA_VIZ_LESSON", "").strip(),
        max_models=_int("MHA_VIZ_MAX_MODELS", 3, 1),
        ahead=_flag("MHA_VIZ_AHEAD", default=True),
        keep_scores=_flag("MHA_VIZ_KEEP_SCORES", default=True),
        scan_kernel=_flag("MHA_VIZ_SCAN_KERNEL"),
    )


def _choice(name: str, choices: tuple[str, ...]) -> str:
    """The variable's value when it is one of `choices` (any case), else the first choice."""
    value = os.environ.get(name, "").strip().lower()
    return value if value in choices else choices[0]


# How long a PyTorch thread that waits for work spins before it sleeps (GNU OpenMP's GOMP_SPINCOUNT; its default is
# 300,000). Two processes computing on the same cores at once (the app's server and a local Ray actor) each spin
# through the time slices the other's threads need: 150 MiniLM analyses next to a Ray job took 16 to 39 s, and 5.8 to
# 6.3 s at 10,000, where a process alone computes as fast as with the default (300 analyses 2.66 s against 2.75 s;
# benchmarks/openmp_spin.py).
OPENMP_SPIN = {"GOMP_SPINCOUNT": "10000"}


def openmp_spin(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to `environ` for a process that may share its cores (OPENMP_SPIN): none where the user
    has set how OpenMP waits (GOMP_SPINCOUNT or OMP_WAIT_POLICY). They act only on a process not yet started: OpenMP
    reads them once, when PyTorch is imported."""
    return {} if {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"} & set(environ) else dict(OPENMP_SPIN)


# Whether NumPy asks the kernel for huge pages for its arrays of 4 MiB and more (madvise(MADV_HUGEPAGE), NumPy's
# default on Linux). In a virtual machine whose host takes back the guest's free memory (a balloon's free page
# reporting, as in Firecracker), a huge page is made of memory the host must hand over again, page by page: on this
# project's 2-core machine a fresh 1.1 GB array took 12.7 s to fill with them and 0.54 s without, and an analysis of
# 1,024 tokens of SmolLM2 (its every-head array 1.1 GB) 9.6 s against 5.3 s (medians, benchmarks/huge_pages.py).
# PyTorch's allocator never asks for them. The app's arrays are written once and read a few times, where huge pages
# save little.
NO_HUGE_PAGES = {"NUMPY_MADVISE_HUGEPAGE": "0"}


def process_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to `environ` for a process the app starts to compute (its server, a Ray worker): OpenMP's
    spin bounded (`openmp_spin`) and NumPy's arrays on ordinary pages (NO_HUGE_PAGES), each unless the user has set
    it. Read once, when the process imports PyTorch and NumPy."""
    pages = {} if "NUMPY_MADVISE_HUGEPAGE" in environ else dict(NO_HUGE_PAGES)
    return openmp_spin(environ) | pages


def machine_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's cpuset), else the count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def thread_share(environ: Mapping[str, str], processes: int) -> dict[str, str]:
    """The variables to add to `environ` for one of `processes` app processes that share this machine's CPUs
    (`mha-viz app --processes N`): PyTorch's threads a process, the CPUs divided among them (at least 1), so that the
    processes together start no more threads than there are CPUs. None where the user has set OMP_NUM_THREADS. Left
    to PyTorch, each process would start as many threads as the machine has CPUs: a student's 10-token sentence of
    MiniLM then cost 24.5 ms of CPU on two threads against 12.6 ms on one, for 12.3 and 12.6 ms of wall time
    (docs/speed.md)."""
    if "OMP_NUM_THREADS" in environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, machine_cpus() // max(1, processes)))}


def size_text(nbytes: float) -> str:
    """1.2 GiB, 340 MiB, 12 KiB: a memory figure in the messages that refuse work over the budget."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes:.0f} B"
