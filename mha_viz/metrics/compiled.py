"""What the compiled loops share (js_kernels.py, head_kernels.py): a vectorisable logarithm
and the threads that run them.

Numba compiles the loops on first use (about a second, then cached on disk beside the module or
in Numba's user cache; the app's preload does it before any session draws). They release the
GIL and each call works on its own slice of the output, so several sessions may call them at
once. The loops are written so that the compiler vectorises them: the logarithm is `log32`,
branch-free, because the library's log is a scalar call.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import torch
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

LN2 = np.float32(math.log(2.0))
SQRT2 = np.float32(math.sqrt(2.0))
_ONE, _HALF = np.float32(1.0), np.float32(0.5)
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


def _probe():
    return 0


def _cache_works() -> bool:
    """Numba refuses cache=True where it can write neither beside the module nor in a user cache
    folder (a read-only install without a home); then the loops compile in memory each run."""
    try:
        numba.njit(cache=True)(_probe)
    except RuntimeError:
        return False
    return True


# Every loop compiles with error_model="numpy": Python's model checks each division for a zero
# divisor, and that branch stops the compiler from vectorising the loop (measured 5x slower).
JIT = {"nogil": True, "fastmath": True, "cache": _cache_works(), "error_model": "numpy"}


@numba.njit(inline="always", **JIT)
def log32(x):
    """ln x for a positive normal float32, to about 1e-7 relative (float32 rounding; the series
    remainder is below 1e-9), branch-free so that loops calling it vectorise: x = f·2^e with
    f in [√½, √2), then the atanh series."""
    b = _bits(x)
    e = np.float32(((b >> 23) & 0xFF) - 127)
    f = _float((b & 0x007FFFFF) | 0x3F800000)  # in [1, 2)
    big = f > SQRT2
    f = f * _HALF if big else f
    e = e + _ONE if big else e
    s = (f - _ONE) / (f + _ONE)
    s2 = s * s
    return e * LN2 + np.float32(2.0) * s * (_ONE + s2 * (_C3 + s2 * (_C5 + s2 * (_C7 + s2 * _C9))))


@numba.njit(**JIT)
def fast_log(x, out):
    """out[:] = log32(x[:])."""
    for j in range(x.size):
        out[j] = log32(x[j])


POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="mha-viz-compiled")


def thread_count() -> int:
    """Threads for a compiled loop: Torch's intra-op count (what the CPU is set to use), ≤ 8."""
    return max(1, min(8, torch.get_num_threads()))


def split(total: int, parts: int) -> list[tuple[int, int]]:
    """[0, total) cut into at most `parts` non-empty ranges of nearly equal size."""
    cuts = np.linspace(0, total, parts + 1).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
