"""Head statistics over a corpus, side by side in one run: the corpus job against a bare batched
forward, Ray against the local engine, and memory from 500 to 2,000 documents.

Run: `.venv/bin/python benchmarks/corpus.py [--repeat 2] [--quick | --ray-only | --examples-only]` (about 5 minutes on
2 idle CPU cores; `--quick`: the bundled sample only, one round, no Ray and no memory sweep;
`--ray-only`: part 2 only).

On the bundled `minilm` (6 × 12 heads), `max_tokens=128`, batch size 16, `importance=False`:

1. throughput on the bundled sample (354 sentences) and on 2,000 documents (sample sentences
   joined two or three at a time, deterministic): `corpus.head_statistics(model, docs,
   engine="local")` — padded batches, eager capture, every document's head table (all 15
   numeric columns, with the output norms), its 72 × 72 pattern cosines and the accumulation —
   against the floor, the same batches through the same model with PyTorch's fused attention
   and nothing recorded (`LoadedModel.fused_forward`), tokenization included in both. Rounds
   alternate the two; the best round of each is reported (the machine may be shared).
2. `engine="ray"` against `engine="local"` on the same 2,000 documents, importance off, on a
   local Ray (2 logical CPUs, one actor holding the model), started once before the timing (its
   start, ~2-5 s, is printed apart). The first Ray job starts the actor (a new process imports
   torch and transformers and loads the model): its time to the first batch and its whole time
   are printed apart. The later jobs reuse that actor (`ray_engine.actors()` is checked to be the
   same): they alternate with local jobs, `--repeat` rounds (at least 2), each round and the best
   of each printed; the verdict compares the best later Ray job with the best local job.
3. peak memory: a fresh process per size (500, 1,000, 2,000 documents) loads the model, runs the
   job and reports its peak resident size (VmHWM) above what it held after loading the model.
   Streaming holds one batch at a time, so this should not grow with the corpus.
4. each head's examples (issue 31, `--examples-only` runs this part alone): the statistics with
   the examples kept in the same pass (`examples=corpus.ExampleOptions()`) against the statistics
   alone, on the sample and on 2,000 documents, alternating, best round of each (target at most
   1.3 ×); and the peak memory of a job with examples at 500 and 5,000 documents (flat: the heaps,
   histograms and kept patterns are fixed by the options).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402
from mha_viz import corpus  # noqa: E402
from mha_viz.corpus.batching import pad_batch, plan  # noqa: E402

MODEL, MAX_TOKENS, BATCH = "minilm", 128, 16


def documents(count: int) -> list[str]:
    """`count` documents from the bundled sample: its sentences joined two or three at a time,
    walking the sample with a stride so that neighbours differ (deterministic)."""
    sample = corpus.read_texts("sample")
    docs, i = [], 0
    while len(docs) < count:
        k = 2 + len(docs) % 2
        docs.append(" ".join(sample[(i + j * 37) % len(sample)] for j in range(k)))
        i += 1
    return docs


def bare(model, docs: list[str]) -> None:
    """The floor: the same padded batches through fused attention, nothing recorded."""
    for batch in plan(docs, BATCH):
        ids, mask = pad_batch(model, [mha_viz.tokenize(model, t, MAX_TOKENS) for t in batch])
        model.fused_forward(ids, mask)


def job(model, docs: list[str], engine: str = "local", examples: bool = False):
    return corpus.head_statistics(model, docs, engine=engine, batch_size=BATCH, max_tokens=MAX_TOKENS,
                                  importance=False, examples=corpus.ExampleOptions() if examples else None)


def examples_cost(model, sets: dict, rounds: int) -> list[tuple[str, str, bool]]:
    """Statistics with and without the examples, alternating, best round of each; peaks with examples."""
    verdicts = []
    for name, docs in sets.items():
        alone = with_examples = float("inf")
        for _ in range(max(rounds, 2)):
            start = time.perf_counter()
            job(model, docs)
            alone = min(alone, time.perf_counter() - start)
            start = time.perf_counter()
            ex = job(model, docs, examples=True).examples
            with_examples = min(with_examples, time.perf_counter() - start)
        ratio = with_examples / alone
        heads = model.num_layers * model.num_heads
        print(f"{name:16s}: statistics {alone:.2f} s, with examples {with_examples:.2f} s ({ratio:.2f} ×); "
              f"{ex.nbytes() / heads / 1024:.0f} KiB a head kept ({len(ex.part.patterns):,} patterns)")
        verdicts.append((f"statistics + examples ≤ 1.3 × statistics ({name})",
                         f"{ratio:.2f} × ({with_examples:.2f} / {alone:.2f} s)", ratio <= 1.3))
    peaks = {n: peak(n, examples=True) for n in (500, 5000)}
    print("peak memory with examples above the loaded model: " +
          ", ".join(f"{n:,} docs {p:.0f} MiB" for n, p in peaks.items()))
    verdicts.append(("peak memory with examples flat from 500 to 5,000 documents",
                     f"{peaks[500]:.0f} → {peaks[5000]:.0f} MiB", peaks[5000] <= 1.2 * peaks[500] + 32))
    return verdicts


def best_rate(fn, n_docs: int, rounds: int) -> float:
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        best = max(best, n_docs / (time.perf_counter() - start))
    return best


def throughput(model, docs: list[str], rounds: int) -> tuple[float, float]:
    """(bare docs/s, corpus docs/s), the two alternating, best round of each."""
    bare(model, docs[:32])  # warm-up
    rates = {"bare": 0.0, "corpus": 0.0}
    for _ in range(rounds):
        rates["bare"] = max(rates["bare"], best_rate(lambda: bare(model, docs), len(docs), 1))
        rates["corpus"] = max(rates["corpus"], best_rate(lambda: job(model, docs), len(docs), 1))
    return rates["bare"], rates["corpus"]


def ray_job(docs: list[str]) -> tuple[float, float]:
    """(seconds until the first batch came back, seconds for the whole job) on Ray."""
    first = []  # progress is also called, with 0 done, while no batch has come back

    def progress(done: int, *_) -> None:
        if done and not first:
            first.append(time.perf_counter() - start)

    start = time.perf_counter()
    corpus.head_statistics(MODEL, docs, engine="ray", batch_size=BATCH, max_tokens=MAX_TOKENS, importance=False,
                           progress=progress)
    return first[0], time.perf_counter() - start


def ray_against_local(model, docs: list[str], rounds: int) -> list[tuple[str, str, bool]]:
    """Part 2 (module doc): the first Ray job, then later ones alternating with local jobs."""
    from mha_viz.corpus import ray_engine  # heavy optional: only this part needs Ray

    n, start = len(docs), time.perf_counter()
    ray_engine.connect()
    print(f"\nRay started in {time.perf_counter() - start:.1f} s (once; not in the timings)")
    first_batch, first_job = ray_job(docs)
    kept = ray_engine.actors()
    print(f"first Ray job: first batch after {first_batch:.2f} s (its actor starting: torch, transformers and "
          f"the model loaded in a new process), whole job {first_job:.1f} s, {n / first_job:.1f} docs/s")
    local, remote, starts = [], [], []
    for i in range(max(2, rounds)):
        local.append(best_rate(lambda: job(model, docs), n, 1))
        started, whole = ray_job(docs)
        remote.append(n / whole)
        starts.append(started)
        print(f"  round {i + 1}: local {local[-1]:.1f} docs/s, Ray {remote[-1]:.1f} docs/s "
              f"({remote[-1] / local[-1]:.2f} ×), Ray's first batch after {started * 1000:.0f} ms")
    same = ray_engine.actors() == kept
    print(f"later Ray jobs on the first job's actor: {'yes' if same else 'NO'} ({len(kept)} actor(s), "
          f"model loaded {sum(a['loads'] for a in kept)} time(s))")
    best, first = max(remote) / max(local), (n / first_job) / max(local)
    print(f"2,000 documents, best of each: local {max(local):.1f} docs/s, later Ray jobs {max(remote):.1f} docs/s, "
          f"ratio {best:.2f}; the first Ray job {first:.2f} × local")
    ray_engine.shutdown()
    return [("Ray ≥ 0.8 × local, later jobs (2,000 documents)", f"{best:.2f} × (first job {first:.2f} ×)",
             best >= 0.8 and same),
            ("a later Ray job's first batch in < 1 s", f"{max(starts) * 1000:.0f} ms at most (first job "
             f"{first_batch:.1f} s)", max(starts) < 1.0)]


def peak_child(count: int, examples: bool = False) -> None:
    """In a fresh process: the peak resident size above the size after loading, as JSON."""
    model = mha_viz.load_model(MODEL, device="cpu")
    docs = documents(count)
    base = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
    job(model, docs, examples=examples)
    print(json.dumps({"docs": count, "peak_above_mib": (_rss_kib("VmHWM") - base) / 1024}))


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak(count: int, examples: bool = False) -> float:
    out = subprocess.run([sys.executable, __file__, "--peak-child", str(count)] + (["--examples"] if examples else []),
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak_above_mib"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ray-only", action="store_true", help="part 2 only: Ray against local")
    parser.add_argument("--examples-only", action="store_true", help="part 4 only: the cost of the head examples")
    parser.add_argument("--peak-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--examples", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak_child:
        peak_child(args.peak_child, examples=args.examples)
        return
    rounds = 1 if args.quick else args.repeat
    model = mha_viz.load_model(MODEL, device="cpu")
    print(f"{MODEL} on {model.device}, {torch.get_num_threads()} torch threads, max_tokens {MAX_TOKENS}, "
          f"batch {BATCH}, importance off\n")
    verdicts = []
    if args.ray_only:
        print_verdicts(ray_against_local(model, documents(2000), rounds), where=f"{os.cpu_count()} CPUs")
        return
    sets = {"sample": corpus.read_texts("sample")} | ({} if args.quick else {"2,000 documents": documents(2000)})
    if args.examples_only:
        print_verdicts(examples_cost(model, sets, rounds), where=f"{os.cpu_count()} CPUs")
        return
    for name, docs in sets.items():
        floor, ours = throughput(model, docs, rounds)
        print(f"{name:16s}: bare forward {floor:7.1f} docs/s, corpus statistics {ours:7.1f} docs/s, "
              f"ratio {ours / floor:.2f}")
        verdicts.append((f"corpus ≥ 0.5 × bare batched forward ({name})", f"{ours / floor:.2f} ×", ours / floor >= 0.5))
    if not args.quick:
        docs = sets["2,000 documents"]
        verdicts += ray_against_local(model, docs, rounds)
        peaks = {n: peak(n) for n in (500, 1000, 2000)}
        print("\npeak memory above the loaded model: " + ", ".join(f"{n:,} docs {p:.0f} MiB" for n, p in peaks.items()))
        flat = peaks[2000] <= 1.2 * peaks[500] + 32
        verdicts.append(("peak memory flat from 500 to 2,000 documents",
                         f"{peaks[500]:.0f} → {peaks[2000]:.0f} MiB", flat))
        verdicts += examples_cost(model, sets, rounds)
    print_verdicts(verdicts, where=f"{os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
