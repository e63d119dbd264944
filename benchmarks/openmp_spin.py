"""Two PyTorch processes on the same cores, side by side in one run: GNU OpenMP's default spin (300,000) against
`mha_viz.settings.OPENMP_SPIN` (what `mha-viz` gives its server and `ray_engine` its actors).

Run: `.venv/bin/python benchmarks/openmp_spin.py [--rounds 2] [--analyses 150]` (about 3 minutes on 2 idle cores).

The app's side: a process loads the bundled `minilm` and times `--analyses` analyses of one sentence, as a server
does for its sessions' reruns. The Ray side: a process runs `corpus.head_statistics(engine="ray")` over 16 sample
sentences again and again on a local Ray cluster (one actor, two torch threads on 2 cores) while the app's side
times its analyses, and reports its documents a second. Each case starts both processes afresh, since OpenMP reads
the setting once, when PyTorch is imported; the cases alternate, `--rounds` times, and the best round of each is
compared. Alone: each side without the other, with each setting.

On this project's 2-core machine (stop 85): the analyses took 16 and 39 s next to the Ray job with the default spin,
6.1 and 6.3 s with 10,000, and 2.3-3.2 s for 300 alone with either.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = {"GOMP_SPINCOUNT": "300000"}  # libgomp's own default, set so that mha_viz adds nothing
SENTENCE = "The animal didn't cross the street because it was too tired, said the teacher to the class."


def app_side(ready: Path, done: Path, analyses: int) -> None:
    import mha_viz

    model = mha_viz.load_model("minilm")
    for _ in range(3):
        mha_viz.analyze(model, SENTENCE)
    deadline = time.monotonic() + 600
    while not ready.exists() and time.monotonic() < deadline:  # the Ray side's actor is up (or no Ray side)
        time.sleep(0.05)
    start = time.perf_counter()
    for _ in range(analyses):
        mha_viz.analyze(model, SENTENCE)
    print(f"RESULT {time.perf_counter() - start:.3f}", flush=True)
    done.write_text("done")


def ray_side(ready: Path, done: Path, jobs: int) -> None:
    from mha_viz import corpus
    from mha_viz.corpus import ray_engine

    docs = corpus.read_texts("sample")[:16]
    options = {"engine": "ray", "batch_size": 8, "max_tokens": 64, "importance": False}
    corpus.head_statistics("minilm", docs, **options)  # the actor started and its model loaded
    ready.write_text("ready")
    count, start = 0, time.perf_counter()
    while (not done.exists()) if jobs == 0 else count < jobs * len(docs):
        corpus.head_statistics("minilm", docs, **options)
        count += len(docs)
    print(f"RESULT {count / (time.perf_counter() - start):.3f}", flush=True)
    ray_engine.shutdown()


def _start(role: str, env: dict[str, str], ready: Path, done: Path, size: int) -> subprocess.Popen:
    child_env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "RAY_ADDRESS")}
    child_env.update(env, HF_HUB_OFFLINE="1")
    return subprocess.Popen([sys.executable, __file__, "--role", role, str(ready), str(done), str(size)], cwd=ROOT,
                            env=child_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _result(proc: subprocess.Popen) -> float:
    out, _ = proc.communicate(timeout=900)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise SystemExit(f"a side failed (exit {proc.returncode}): {out[-2000:]}")
    return float(lines[-1].split()[1])


def case(env: dict[str, str], analyses: int, together: bool) -> tuple[float, float]:
    """(the analyses' seconds, the Ray side's documents a second) with `env` in both; one side alone where not
    `together` (the app side with no Ray side, then the Ray side for 6 jobs)."""
    with tempfile.TemporaryDirectory() as tmp:
        ready, done = Path(tmp, "ready"), Path(tmp, "done")
        if together:
            ray = _start("ray", env, ready, done, 0)
            app = _start("app", env, ready, done, analyses)
            return _result(app), _result(ray)
        ready.write_text("alone")
        app_s = _result(_start("app", env, ready, done, 2 * analyses))
        ready.unlink()
        return app_s, _result(_start("ray", env, ready, done, 6))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--analyses", type=int, default=150)
    args = parser.parse_args()
    from mha_viz.settings import OPENMP_SPIN

    cases = {"default spin": DEFAULT, f"GOMP_SPINCOUNT={OPENMP_SPIN['GOMP_SPINCOUNT']}": OPENMP_SPIN}
    best: dict[tuple[str, bool], tuple[float, float]] = {}
    for rnd in range(args.rounds):
        for together in (True, False):
            for name, env in cases.items():
                app_s, docs_s = case(env, args.analyses, together)
                where = "together" if together else "alone"
                print(f"round {rnd + 1}, {where:8} {name:22}: analyses {app_s:7.2f} s, Ray {docs_s:6.1f} docs/s",
                      flush=True)
                old = best.get((name, together))
                best[(name, together)] = (min(app_s, old[0]), max(docs_s, old[1])) if old else (app_s, docs_s)
    (default, calm) = cases
    for together, what in ((True, f"{args.analyses} analyses next to a Ray job"),
                           (False, f"{2 * args.analyses} analyses alone, and a Ray job alone")):
        d, c = best[(default, together)], best[(calm, together)]
        print(f"{what}: analyses {d[0]:.2f} s / {c[0]:.2f} s = {d[0] / c[0]:.2f}x faster with {calm}; "
              f"Ray {c[1]:.1f} / {d[1]:.1f} docs/s = {c[1] / d[1]:.2f}x (best of {args.rounds} rounds)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--role":
        role, ready_path, done_path, size = sys.argv[2:6]
        (app_side if role == "app" else ray_side)(Path(ready_path), Path(done_path), int(size))
    else:
        main()
