"""This process's resident memory, as Linux reports it (/proc/self/status), and its peak since a
reset: what the memory estimates are held against (tests/models/memory_probe.py,
benchmarks/memory_peak.py, benchmarks/generation.py).

`reset_peak()` writes 5 to /proc/self/clear_refs, which sets VmHWM back to the current VmRSS;
where that file cannot be written (not Linux, a locked-down container) it returns False and the
callers fall back to ru_maxrss, or to sampling. `trim()` hands freed heap pages back to the system
first (glibc's malloc_trim), so that a computation cannot hide in pages an earlier one left behind."""

from __future__ import annotations

import ctypes
import gc
import resource
import sys

try:
    _LIBC = ctypes.CDLL("libc.so.6") if sys.platform.startswith("linux") else None
except OSError:  # not glibc
    _LIBC = None


def status(field: str) -> int:
    """A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); OSError off Linux, KeyError without it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def resident() -> int:
    """Bytes resident now (VmRSS), or the process's peak so far where /proc cannot say."""
    try:
        return status("VmRSS")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak() -> bool:
    """Set the peak (VmHWM) back to what is resident now; False where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak(reset: bool) -> int:
    """The peak resident bytes since `reset_peak()` (when it returned True), else the process's whole peak."""
    return status("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def trim() -> None:
    """Collect garbage and give freed heap pages back to the system (glibc only)."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
