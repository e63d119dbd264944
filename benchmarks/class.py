"""A class at once on a server just started (issue 91): for 30, 100 and 300 students (`--students`), each on a new
server whose script has never run, every student connects at the same moment over Streamlit's websocket protocol,
lands (on a link naming `--model`, default MiniLM), types a sentence of its own and opens the Head view
(`tests/e2e/class_client.py`). Printed per class: when the first, the median and the last student saw its own Head
view (seconds from the start), how many saw their own word and no other's, the errors, the server's CPU seconds
(user + system, over the class), its peak resident memory, and the machine's idle and stolen CPU seconds over the
class (all cores; `app_server.machine_seconds`): whether the server left cores unused, and whether the host of a
virtual machine took some away (a class slower by what was stolen, which a fixed loop of Python does not show).

Run: `.venv/bin/python benchmarks/class.py` (the three classes: about 3 minutes on 2 cores). The issue's targets: the
last of 300 within 20 s and the median within 10 s on one process; with `--processes 2`, N app processes behind nginx
(`mha-viz app --processes N`, each student's websocket kept on one of them), the last of 300 within 12 s. The CPU
and the peak memory are then the sum over the launcher, the app processes and nginx. The server is started as a
teacher starts it, by the launcher (`mha-viz app`), with the environment it gives the app: until stop 114 a class on
one process ran `streamlit run app.py` without it (OpenMP's spin unbounded: 3 % more CPU a student).

`--pin` keeps the simulated students off the server's cores: the app's processes (and nginx) on the first N CPUs, N
the processes, the students on the others (so N must be fewer than the CPUs: one process on 2 cores). A lecture hall's
students are on their own machines; here their 300 clients share the server's cores, and a send to one of them can
take the core from a server thread that holds the interpreter's lock (docs/speed.md, stop 127).

`--pythons A B` runs each class's app under each interpreter in turn (each a virtual environment with the
requirements and this checkout installed, e.g. `make install VENV=<another folder> PYTHON=<the distribution's
python3.11>`): how much the build of Python itself moves a class (docs/deploying.md). The students always run under
this script's interpreter.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_server import (  # noqa: E402 - benchmarks/app_server.py
    checkout_env,
    cpu_seconds,
    free_port,
    machine_seconds,
    peak_bytes,
    stop_server,
    wait_healthy,
)

import mha_viz  # noqa: E402
from tests.e2e.class_client import class_of, marker_words, sentence_of  # noqa: E402

BOOT_S = 240


def start_app(port: int, processes: int, root: Path, cpus: set[int] | None = None,
              python: str = sys.executable) -> subprocess.Popen:
    """`mha-viz app` of `root`'s checkout on `port`, run by `python`, with `--processes N` where N > 1 (nginx in
    front), its output thrown away; on the CPUs `cpus` only, where given (every process it starts inherits them)."""
    env = checkout_env(root, {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    group = ["--processes", str(processes)] if processes > 1 else []
    return subprocess.Popen([python, "-m", "mha_viz", "app", *group, "--port", str(port)], cwd=root, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True,
                            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus))


def split_cpus(processes: int) -> tuple[set[int], set[int]]:
    """(the server's CPUs, the students'): the first `processes` of this process's CPUs, and the rest (`--pin`)."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) <= processes:
        raise SystemExit(f"--pin needs more CPUs than app processes: {len(mine)} CPUs, {processes} processes")
    return set(mine[:processes]), set(mine[processes:])


def one_class(students: int, words: list[str], root: Path = ROOT, processes: int = 1, model: str = "minilm",
              pin: bool = False, python: str = sys.executable) -> dict:
    """A class of `students` on a new server of `root`'s app.py (or `processes` of them behind nginx) run by `python`,
    each landing on a link to `model`: its distribution, CPU and memory. `pin`: the server and the students on CPUs
    apart (`split_cpus`)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server_cpus, student_cpus = split_cpus(processes) if pin else (None, None)
    server = start_app(port, processes, root, server_cpus, python)
    own_cpus = os.sched_getaffinity(0)
    try:
        wait_healthy(base, server, BOOT_S)
        cpu, machine = cpu_seconds(server.pid), machine_seconds()
        os.sched_setaffinity(0, student_cpus or own_cpus)
        try:
            seen = class_of(base, [sentence_of(w) for w in words[:students]], f"model={model}")
        finally:
            os.sched_setaffinity(0, own_cpus)
        cpu = cpu_seconds(server.pid) - cpu
        machine = {k: v - machine[k] for k, v in machine_seconds().items()}
        peak = peak_bytes(server.pid)
    finally:
        stop_server(server)
    done = sorted(s.done for s in seen if not s.errors)
    own = sum(w in s.tokens() and not (s.tokens() & set(words)) - {w} for w, s in zip(words, seen))
    return {"students": students, "first": done[0] if done else None, "median": statistics.median(done) if done
            else None, "last": done[-1] if done else None, "own": own, "errors": sum(bool(s.errors) for s in seen),
            "cpu": cpu, "peak": peak, "idle": machine["idle"], "stolen": machine["stolen"]}


def say(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[30, 100, 300])
    parser.add_argument("--processes", type=int, default=1,
                        help="app processes behind nginx (mha-viz app --processes N; nginx must be installed)")
    parser.add_argument("--roots", type=Path, nargs="+", default=[ROOT],
                        help="checkouts whose app.py to serve, side by side (e.g. a clone of an earlier commit)")
    parser.add_argument("--model", default="minilm",
                        help="the model every student's link names (the default model, or e.g. smollm2)")
    parser.add_argument("--pythons", nargs="+", default=[sys.executable],
                        help="the interpreters that run the app (each a virtual environment's python with the "
                             "requirements and this checkout installed), side by side; default: this one")
    parser.add_argument("--pin", action="store_true",
                        help="the app's processes on the first N CPUs, the simulated students on the others")
    args = parser.parse_args()
    words = marker_words(mha_viz.load_model(args.model).tokenizer, max(args.students))
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    print(f"{args.processes} app process{'es behind nginx' if args.processes > 1 else ''} a class, on {args.model}"
          + (", the students on CPUs of their own" if args.pin else ""))
    print("| app | students | first | median | last | own sentence, no other's | errors | server CPU | server peak | "
          "machine idle | stolen |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for students in args.students:
        for root, python in itertools.product(args.roots, args.pythons):
            r = one_class(students, words, root, args.processes, args.model, args.pin, python)
            name = root.name + (f" ({python})" if len(args.pythons) > 1 else "")
            print(f"| {name} | {r['students']} | {say(r['first'])} | {say(r['median'])} | {say(r['last'])} | "
                  f"{r['own']} of {students} | {r['errors']} | {r['cpu']:.1f} s ({r['cpu'] / students:.2f} s a "
                  f"student) | {r['peak'] / 2**30:.2f} GiB | {r['idle']:.1f} s | {r['stolen']:.1f} s |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
