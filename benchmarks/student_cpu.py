"""What one student costs a server, two versions side by side (issue 91): two servers run at once, students take
turns between them one at a time (A then B, then B then A), and each step's server CPU is read around it: landing,
typing a sentence of its own, opening the Head view (`tests/e2e/class_client.py`'s steps). Both servers see the
machine as it is at the same moment, so a machine that speeds up or slows down while it runs moves both alike; a
class (`benchmarks/class.py`) cannot tell a change of 5 % from the machine's drift.

Printed: each server's mean CPU a step and a student (± its standard error) and the ratio B / A. Two servers of the
same code measured 0.984 (150 students each); so read a ratio within about ±3 % of 1 as no change.

Run: `.venv/bin/python benchmarks/student_cpu.py --roots <checkout A> <checkout B> [--students 150]
[--env-a NAME=VALUE ...] [--env-b NAME=VALUE ...]` (about 2 minutes on 2 cores for 150 students each). `--env-a` and
`--env-b` start server A or B with environment variables of their own (e.g. OMP_NUM_THREADS=1), for a setting rather
than a version.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_server import cpu_seconds, free_port, start_server, stop_server, wait_healthy  # noqa: E402 - beside this script

import mha_viz  # noqa: E402
from tests.e2e.class_client import Seen, Session, connect, marker_words, sentence_of  # noqa: E402

BOOT_S = 240
WARM = 6  # students each server serves before the count (its first runs import and cache)
STEPS = ("landing", "sentence", "head view")


async def student(base: str, pid: int, sentence: str) -> tuple[float, float, float]:
    """One student's three steps on the server at `base`: the server's CPU seconds (process `pid`) each took. Fails
    if its Head view does not show the student's own word."""
    word = sentence.split()[3]
    async with connect(base) as socket:
        session = Session(socket, Seen(sentence), base)
        spent = []
        before = cpu_seconds(pid)
        await session.run()
        spent.append(cpu_seconds(pid) - before)
        typed = {session.box_id: sentence}
        before = cpu_seconds(pid)
        await session.run(page=session.page, widgets=typed)
        spent.append(cpu_seconds(pid) - before)
        before = cpu_seconds(pid)
        await session.run(page=session.pages["head_view"], widgets=typed)
        spent.append(cpu_seconds(pid) - before)
    if session.seen.errors or word not in session.seen.tokens():
        raise RuntimeError(f"{base}: the Head view of {sentence!r} did not show {word!r}: {session.seen.errors}")
    return spent[0], spent[1], spent[2]


async def side_by_side(servers: dict[str, tuple[str, int]], words: list[str], students: int) -> dict[str, list]:
    spent: dict[str, list] = {name: [] for name in servers}
    for i in range(WARM + students):
        order = list(servers) if i % 2 == 0 else list(reversed(servers))
        for name in order:
            steps = await student(*servers[name], sentence_of(words[i % len(words)]))
            if i >= WARM:
                spent[name].append(steps)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=Path, nargs=2, default=[ROOT, ROOT], help="checkouts A and B")
    parser.add_argument("--students", type=int, default=150, help="students each server serves (after the warm-up)")
    parser.add_argument("--env-a", nargs="*", default=[], help="NAME=VALUE for server A only")
    parser.add_argument("--env-b", nargs="*", default=[], help="NAME=VALUE for server B only")
    args = parser.parse_args()
    env_a, env_b = (dict(item.split("=", 1) for item in pairs) for pairs in (args.env_a, args.env_b))
    words = marker_words(mha_viz.load_model("minilm").tokenizer, 300)
    procs, servers = [], {}
    try:
        for name, root, env in (("A", args.roots[0], env_a), ("B", args.roots[1], env_b)):
            port = free_port()
            procs.append(start_server(port, Path(os.devnull), root, **env))
            servers[name] = (f"http://127.0.0.1:{port}", procs[-1].pid)
        for (base, _), proc in zip(servers.values(), procs):
            wait_healthy(base, proc, BOOT_S)
        spent = asyncio.run(side_by_side(servers, words, args.students))
    finally:
        for proc in procs:
            stop_server(proc)
    totals = {}
    print(f"| server | checkout | {' | '.join(STEPS)} | a student |")
    print("|---|---|---|---|---|---|")
    for (name, rows), root in zip(spent.items(), args.roots):
        steps = [statistics.mean(col) * 1e3 for col in zip(*rows)]
        totals[name] = [sum(r) for r in rows]
        error = statistics.stdev(totals[name]) / len(rows) ** 0.5 * 1e3
        pairs = args.env_a if name == "A" else args.env_b
        extra = f" ({' '.join(pairs)})" if pairs else ""
        print(f"| {name} | {root}{extra} | " + " | ".join(f"{s:.1f} ms" for s in steps)
              + f" | {statistics.mean(totals[name]) * 1e3:.1f} ± {error:.1f} ms |")
    print(f"B / A: {statistics.mean(totals['B']) / statistics.mean(totals['A']):.3f} ({args.students} students each)")


if __name__ == "__main__":
    main()
