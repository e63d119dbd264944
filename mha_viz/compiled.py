"""What the compiled loops share (metrics/js_kernels.py, metrics/row_kernels.py, capture/pool_kernel.py): a
vectorisable logarithm, the compiler's options, its cache folder and the threads that run the loops.

Numba compiles the loops on first use (about a second; the app's preload does it before any
session draws) and keeps them on disk. Numba invalidates a cached loop only when its own file
changes, not when a function it inlines from another file (`log32`) does: the cache folder is
therefore named by a hash of their files (`KERNEL_FILES`, `cache_folder`). The loops release the GIL and
each call works on its own slice of the output, so several sessions may call them at once. They
are written so that the compiler vectorises them: the logarithm is `log32`, branch-free,
because the library's log is a scalar call.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import nullcontext
from pathlib import Path

import numba
import numpy as np
import torch
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from mha_viz_models.cache_folder import cache_root, exclusive

LN2 = np.float32(math.log(2.0))
SQRT2 = np.float32(math.sqrt(2.0))
ONE, HALF = np.float32(1.0), np.float32(0.5)
# 2·atanh series coefficients: ln f = 2s(1 + s²/3 + s⁴/5 + …), s = (f − 1)/(f + 1), |s| ≤ 0.172
_C3, _C5, _C7, _C9 = (np.float32(1.0 / k) for k in (3, 5, 7, 9))


@intrinsic
def _bits(typingctx, x):
    """The bits of a float32 as an int32 (a reinterpretation, not a conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def _float(typingctx, b):
    """The float32 whose bits are the int32 b."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


# the loops' files and what they inline, under mha_viz/ (metrics/row_measures.py: the sums' order)
KERNEL_FILES = ("compiled.py", "metrics/js_kernels.py", "metrics/row_kernels.py", "metrics/row_measures.py",
                "metrics/row_loop.py", "capture/pool_kernel.py")


def source_hash() -> str:
    """A hash of the compiled loops' sources and Numba's version: the name of their cache folder."""
    digest = hashlib.sha256(numba.__version__.encode())
    for name in KERNEL_FILES:
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_folder() -> Path | None:
    """Where the compiled loops are kept: NUMBA_CACHE_DIR (when set) or mha-viz's cache folder,
    then `source_hash()`; None when it cannot be written (the loops then compile in memory each
    run rather than risk a stale cache elsewhere)."""
    base = Path(os.environ["NUMBA_CACHE_DIR"]) if os.environ.get("NUMBA_CACHE_DIR") else cache_root() / "numba"
    folder = base / source_hash()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return None
    return folder


_CACHE = cache_folder()
if _CACHE is not None:
    numba.config.CACHE_DIR = str(_CACHE)  # read by Numba when each loop below is defined


def compiling():
    """Inside: this process alone compiles the loops into the cache (a lock file in it); the others wait, then load
    what it wrote. Several processes starting at once on a new version (`mha-viz app --processes N`, the test suite's
    servers and workers) each compiled every loop: about 12 s of CPU each on 2 cores."""
    return exclusive(_CACHE / ".compile.lock") if _CACHE is not None else nullcontext()

# Every loop compiles with error_model="numpy": Python's model checks each division for a zero
# divisor, and that branch stops the compiler from vectorising the loop (measured 5x slower).
# Fast-math without its no-NaN and no-infinity assumptions: the loops use inf and NaN on purpose.
JIT = {"nogil": True, "fastmath": {"nsz", "arcp", "contract", "afn", "reassoc"}, "cache": _CACHE is not None,
       "error_model": "numpy"}


@numba.njit(inline="always", **JIT)
def bits_float(b):
    """The float32 whose bits are the int32 b: a maximum taken over a non-negative float32 array's bits (viewed as
    int32, whose order is the floats' there) read back as a float."""
    return _float(b)


@numba.njit(inline="always", **JIT)
def log32(x):
    """ln x for a positive normal float32, to about 1e-7 relative (float32 rounding; the series
    remainder is below 1e-9), branch-free so that loops calling it vectorise: x = f·2^e with
    f in [√½, √2), then the atanh series."""
    b = _bits(x)
    e = np.float32(((b >> 23) & 0xFF) - 127)
    f = _float((b & 0x007FFFFF) | 0x3F800000)  # in [1, 2)
    big = f > SQRT2
    f = f * HALF if big else f
    e = e + ONE if big else e
    s = (f - ONE) / (f + ONE)
    s2 = s * s
    return e * LN2 + np.float32(2.0) * s * (ONE + s2 * (_C3 + s2 * (_C5 + s2 * (_C7 + s2 * _C9))))


WORKERS = 8  # threads of POOL (a call uses thread_count() of them)
POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="mha-viz-compiled")
_worker = threading.local()  # set on POOL's threads: a loop started there runs inline


def _marked(fn, *args):
    _worker.inside = True
    return fn(*args)


def run_all(fn, calls: list[tuple]) -> None:
    """fn(*args) for each args in `calls`, one a thread of POOL, and wait for all (then the first
    failed one's error raised here). Called from one of POOL's own threads, the calls run one after the other there
    (waiting on the pool from inside it could leave every worker waiting)."""
    if getattr(_worker, "inside", False):
        for args in calls:
            fn(*args)
        return
    jobs = [POOL.submit(_marked, fn, *args) for args in calls]
    wait(jobs)  # every call ended before any error is raised: none still runs once the caller goes on
    for job in jobs:
        job.result()


def thread_count() -> int:
    """Threads for a compiled loop: Torch's intra-op count (what the CPU is set to use), ≤ 8."""
    return max(1, min(WORKERS, torch.get_num_threads()))


def split(total: int, parts: int) -> list[tuple[int, int]]:
    """[0, total) cut into at most `parts` non-empty ranges of nearly equal size."""
    cuts = np.linspace(0, total, parts + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
