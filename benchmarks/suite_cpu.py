"""Where the machine's CPU goes while a command runs (issue 92: `make test` within 15 minutes on 2 cores): every
process on the machine is read from /proc twice a second, and its CPU time is added to its kind (the suite's test
processes, Chromium by process type, the app servers the tests start, Ray, nginx, playwright's driver, other Python
programs by module, anything else by name). Printed: the wall time, the CPU time the machine had (cores × wall), how
much of it stood idle, and each kind's CPU seconds and share, largest first.

The test processes' own timeline (MHA_VIZ_TEST_TIMELINE, tests/scheduling.py) counts a child's CPU only when the
child is reaped, so a browser or a server that lives across tests shows there as a lump at its end (200 CPU-s in
the last test of the browser tier's process): this reads every process while it runs. A process that ends between
two reads loses its last half second.

Run: `.venv/bin/python benchmarks/suite_cpu.py [--log FILE] [-- command ...]` (default: `make test`; the command's
own output goes to FILE, by default a temporary file whose path is printed).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_server import ticks  # noqa: E402 - benchmarks/app_server.py

PERIOD_S = 0.5
HZ = os.sysconf("SC_CLK_TCK")


def kind(cmdline: str) -> str | None:
    """What a process is, from its command line (None: a kernel thread, or gone)."""
    if not cmdline:
        return None
    words = cmdline.split()
    if "chrom" in words[0]:
        found = re.search(r"--type=([a-z-]+)", cmdline)
        return f"chromium {found.group(1) if found else 'browser'}"
    if "xdist" in cmdline or "pytest" in cmdline or "exec(eval(sys.stdin.readline()))" in cmdline:  # execnet's
        return "test processes (pytest and its xdist workers)"
    if "streamlit" in cmdline or "mha-viz" in cmdline or " mha_viz" in cmdline:
        return "app servers and mha-viz commands"
    if "ray" in cmdline or "raylet" in cmdline or "gcs_server" in cmdline:
        return "ray"
    if "nginx" in words[0]:
        return "nginx"
    if words[0].endswith("node"):
        return "playwright's driver (node)"
    if "python" in words[0]:
        module = words[words.index("-m") + 1] if "-m" in words[:-1] else (words[1] if len(words) > 1 else "")
        return f"python {module[:60]}"
    return os.path.basename(words[0])[:40]


def _ticks(pid: str) -> tuple[tuple[str, str], int] | None:
    """((pid, start time), user + system ticks) of a process, None when it is gone."""
    try:
        start, spent = ticks(pid)
    except OSError:
        return None
    return (pid, start), spent


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _machine() -> tuple[int, int]:
    """(idle + iowait ticks, all ticks) of the machine so far."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    return fields[3] + fields[4], sum(fields)


def account(command: list[str], log_path: str) -> tuple[float, int, int, collections.Counter]:
    """Run `command` (its output to `log_path`), reading /proc until it ends: (wall seconds, idle ticks, all
    ticks, CPU ticks by kind)."""
    me = str(os.getpid())
    last: dict[tuple[str, str], int] = {}
    names: dict[tuple[str, str], str | None] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):  # what runs before the command is not counted
        read = _ticks(pid)
        if read:
            last[read[0]] = read[1]
    by_kind: collections.Counter = collections.Counter()
    idle0, all0 = _machine()
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        while True:
            ended = proc.poll() is not None
            for pid in filter(str.isdigit, os.listdir("/proc")):
                read = _ticks(pid)
                if read is None or pid == me:
                    continue
                key, now = read
                spent = now - last.get(key, 0)
                last[key] = now
                if spent:
                    if key not in names:  # a command line read once the process has run (after its exec)
                        names[key] = kind(_cmdline(pid))
                    if names[key]:
                        by_kind[names[key]] += spent
            if ended:
                break
            time.sleep(PERIOD_S)
    idle1, all1 = _machine()
    return time.monotonic() - start, idle1 - idle0, all1 - all0, by_kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="*", default=["make", "test"], help="the command (default: make test)")
    parser.add_argument("--log", help="where the command's output goes (default: a temporary file)")
    args = parser.parse_args()
    if args.log is None:
        args.log = tempfile.mkstemp(prefix="suite_cpu-", suffix=".log")[1]
    wall, idle, every, by_kind = account(args.command, args.log)
    cores = os.cpu_count() or 1
    print(f"{' '.join(args.command)}: {wall:.0f} s on {cores} cores ({every / HZ:.0f} CPU-s the machine had, "
          f"{idle / HZ:.0f} of them idle); its output: {args.log}")
    counted = sum(by_kind.values())
    print("| kind | CPU-s | share of what was counted |")
    print("|---|---:|---:|")
    for name, spent in by_kind.most_common():
        if spent / HZ >= 0.5:
            print(f"| {name} | {spent / HZ:.1f} | {spent / counted:.1%} |")
    print(f"| all counted | {counted / HZ:.0f} | |")


if __name__ == "__main__":
    main()
