"""The app's server for the browser benchmarks (load.py, pages.py): a free loopback port, a
`streamlit run app.py` in its own process group, its health check, and stopping the group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(base_url: str, timeout: float = 10) -> str:
    try:
        with urllib.request.urlopen(base_url + "/_stcore/health", timeout=timeout) as r:
            return r.read().decode().strip()
    except OSError as exc:
        return f"unreachable: {exc}"


def wait_healthy(base_url: str, proc: subprocess.Popen, timeout_s: float) -> None:
    """Poll the server's health check until it answers (RuntimeError when the server exits or `timeout_s` pass)."""
    deadline = time.monotonic() + timeout_s
    while health(base_url, timeout=1) != "ok":
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server at {base_url} did not start (exit {proc.poll()})")
        time.sleep(0.2)


def checkout_env(root: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` for a process of `root`'s checkout: where it is another checkout (a worktree of the commit before a
    change), its `models/` first on PYTHONPATH, so that it imports its own mha_viz_models, not this checkout's
    editable install's (its mha_viz is found beside its script, or in its folder for `-m`)."""
    if root.resolve() == ROOT.resolve():
        return env
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(root / "models"), env.get("PYTHONPATH", "")) if p)}


def start_server(port: int, log_path: Path, root: Path = ROOT, script: str = "app.py",
                 **env_vars: str) -> subprocess.Popen:
    """`root`'s `script` (app.py: another checkout's for a side-by-side run) served on `port`, with
    the environment variables `env_vars` added. Another checkout's server imports its own mha_viz_models too (its
    `models/` first on the path): this checkout's editable install would otherwise give it ours, as streamlit finds
    only its mha_viz beside the script."""
    env = checkout_env(root, {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **env_vars})
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
           "--server.address", "127.0.0.1", "--server.port", str(port)]
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 20)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it (the app processes and nginx of a group)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except FileNotFoundError:  # a thread (a session's run) that ended since the folder was listed
                continue
    return out


def ticks(pid: int | str) -> tuple[str, int]:
    """(start time, user + system CPU ticks so far) of process `pid`, from /proc (OSError: it has ended). The start
    time tells a process from a later one that got the same pid."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[19], int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` and those below it so far."""
    return sum(ticks(p)[1] for p in process_tree(pid)) / os.sysconf("SC_CLK_TCK")


def machine_seconds() -> dict[str, float]:
    """The whole machine's CPU seconds so far, every core together (/proc/stat): "busy" (user, nice, system and
    interrupts), "idle" (with I/O wait) and "stolen" (a virtual machine's time that its host gave to others: a class
    whose cores were taken away is slower by as much, and a fixed loop of Python does not show it)."""
    user, nice, system, idle, iowait, irq, softirq, steal = (
        int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9])
    tick = os.sysconf("SC_CLK_TCK")
    return {"busy": (user + nice + system + irq + softirq) / tick, "idle": (idle + iowait) / tick,
            "stolen": steal / tick}


def peak_bytes(pid: int) -> int:
    """The peak resident memory of process `pid` and those below it, summed."""
    total = 0
    for p in process_tree(pid):
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                total += int(line.split()[1]) * 1024
    return total
