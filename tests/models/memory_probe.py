"""Measured peaks, in a process of their own: `python -m tests.models.memory_probe MODEL PATH:N [PATH:N ...]` prints
one line of JSON a case, {"path", "n", "estimate", "peak", "method"}: the bytes the estimate declares and the peak
resident size the computation reached above what the process held just before it (the model loaded and each
computation asked for run once on a few tokens).

PATH: "analysis", `mha_viz.analyze` as the app runs it (`memory.analysis_need`); "long", its long run and its loss read
(`needs.analysis`, the scan's need); "gradient", one
gradient pass of the heads' mask through the model's loss, as `ablation.head_gradients` runs it
(`ablation.gradient_bytes`; for an embedding-only encoder, whose 1 − cosine loss the app never
differentiates, the same pass against a sentence embedding of another text). The peak is VmHWM after
`echo 5 > /proc/self/clear_refs` (freed memory handed back with malloc_trim first, so that the
computation cannot hide in pages the warm-up left behind), or ru_maxrss where clear_refs cannot be
written (then the loading's own peak may hide part of it). `measure` runs it from a test or a
benchmark: one fresh process a model, its cases (both computations, every length) one after the other, each peak
reset, trimmed and measured from what the process holds before it (one start and load, about 5 s, a model);
where the peak cannot be reset, one fresh process a case, so that no peak mixes with another's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable, Iterator

from mha_viz.budget import resident

PATHS = ("analysis", "long", "gradient")
# glibc's allocator with its thresholds fixed: every block over 128 KiB mapped apart and handed back when freed, and
# freed memory at the heap's top trimmed. Its default raises both after the first large block freed (up to 32 MiB
# and 64 MiB), so that freed blocks stay resident: a long run of 2,048 tokens of SmolLM2 peaked at 151 MiB on one
# machine and 223 MiB on another with 100 MiB live. Fixed, the peak is what the computation holds.
LIVE_BYTES = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
USAGE = f"usage: python -m tests.models.memory_probe MODEL {'|'.join(PATHS)}:N [...]"
ROOT = Path(__file__).resolve().parents[2]
PARAGRAPH = ("The old lighthouse stood at the edge of the harbour for more than a hundred years, and every night "
             "its keeper climbed the narrow stairs to light the lamp for the ships coming home. ")


def measure(model: str, cases: Iterable[tuple[str, int]], *, timeout: float = 300) -> dict[tuple[str, int], dict]:
    """{(path, n): {"path", "n", "estimate", "peak", "method"}} of each (path, n) of `cases` on `model`, measured in
    one fresh process (`main`); the cases it could not measure there (no resettable peak), each in a fresh process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MHA_VIZ_MAX_CAPTURE_MB": "1000000", "OMP_NUM_THREADS": "1",
           **LIVE_BYTES}
    wanted = set(cases)
    out: dict[tuple[str, int], dict] = {}
    while todo := sorted(wanted - set(out)):
        args = [f"{path}:{n}" for path, n in todo]
        done = subprocess.run([sys.executable, "-m", "tests.models.memory_probe", model, *args],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the probe of {model} at {todo} failed:\n{done.stderr[-3000:]}")
        got = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if not got:
            raise RuntimeError(f"the probe of {model} at {todo} printed nothing:\n{done.stdout[-3000:]}")
        out.update(((r["path"], r["n"]), r) for r in got)
    return out


def _computation(model, path: str, text: str, n: int):
    """(the computation of `path` on `text` cut to n tokens, the bytes its estimate declares)."""
    import torch

    import mha_viz
    from mha_viz.budget import memory
    from mha_viz.interventions import ablation, heads_off_loss
    from mha_viz.text.loss_inputs import EMBEDDING, pad, prepare
    from mha_viz_models.reading.masking import head_mask

    if path == "analysis":
        # a dense analysis: what analysis_need estimates (a long run is the scan's need)
        tokens = mha_viz.tokenize(model, text, n).n
        need = memory.analysis_need(model, tokens).host
        return (lambda: mha_viz.analyze(model, text, max_tokens=n, dense=True)), need
    if path == "long":  # a long run (every head's array over MHA_VIZ_DENSE_MB): what needs.analysis says of it
        from mha_viz import needs
        tokens = mha_viz.tokenize(model, text, n).n

        def long_run():  # the run, then its own loss and last logits, made at their first read (`own_later`)
            run = mha_viz.analyze(model, text, max_tokens=n, dense=False)
            if run.own is not None:
                run.own.loss  # noqa: B018 (the read makes them)
            return run
        return long_run, needs.analysis(model, tokens).host
    inputs = prepare(model, text, n)
    if inputs.kind != EMBEDDING:
        return (lambda: ablation.head_gradients(model, text, max_tokens=n)), ablation.gradient_bytes(
            model, inputs.ids.shape[1], fused=True)
    with torch.no_grad():  # another text's embedding: a loss whose gradient is not zero
        reference = heads_off_loss.embeddings(model, pad(model, [prepare(model, text[::-1], n)]))

    def gradient():
        scale = torch.ones(model.num_layers, model.num_heads, requires_grad=True)
        with torch.enable_grad(), head_mask(model, scale, None, []):
            loss = heads_off_loss.losses(model, pad(model, [inputs]), reference)[0]
            return torch.autograd.grad(loss, [scale])[0]
    return gradient, ablation.gradient_bytes(model, inputs.ids.shape[1], fused=True)


def main(spec: str, cases: list[tuple[str, int]]) -> Iterator[dict]:
    """Each case's measurement in turn, in this process, after each computation asked for has run once on a few
    tokens; only the first case where the peak cannot be reset (the process's whole peak, ru_maxrss, would mix the
    cases' peaks)."""
    import torch

    import mha_viz

    torch.set_num_threads(1)
    model = mha_viz.load_model(spec, device="cpu")
    for path in dict.fromkeys(p for p, _ in cases):
        warm, _ = _computation(model, path, PARAGRAPH * 4, 8)
        warm()  # lazy initialisations (kernels, tokenizer caches, autograd's) are not the computation's
        del warm
    for path, n in cases:
        run, estimate = _computation(model, path, PARAGRAPH * (4 + n // 16), n)
        resident.trim()
        start = resident.resident()
        reset = resident.reset_peak()
        with AnonPeak() as anon:
            result = run()
        peak = resident.peak(reset) - start
        del result, run
        method = "VmHWM" if reset else "ru_maxrss"
        if anon.peak > peak:  # file pages another process's pressure took back during the run hid part of it
            peak, method = anon.peak, "RssAnon sampled"
        yield {"path": path, "n": n, "estimate": int(estimate), "peak": int(peak), "method": method}
        if not reset:
            return


class AnonPeak:
    """The largest rise of the process's anonymous resident memory (RssAnon) above its value at entry while the block
    runs, read every two milliseconds by a thread of its own (0 where /proc/self/status has no RssAnon). VmHWM also
    counts file pages (the mapped weights, the libraries' code), which memory pressure from other processes may take
    back between the start and the peak: a fresh clone's suite measured a long run's peak at 95 MiB where 179 MiB is
    live. Anonymous pages stay (no swap), so the sampled peak is the floor of what the computation held."""

    def __init__(self) -> None:
        self.peak, self._stop = 0, threading.Event()

    def _sample(self) -> int:
        try:
            return resident.status("RssAnon")
        except (OSError, KeyError):
            return 0

    def _watch(self, start: int) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._sample() - start)

    def __enter__(self) -> AnonPeak:
        self._thread = threading.Thread(target=self._watch, args=(self._sample(),), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _case(arg: str) -> tuple[str, int]:
    path, _, n = arg.partition(":")
    if path not in PATHS or not n.isdigit():
        sys.exit(f"{USAGE} (not {arg!r})")
    return path, int(n)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(USAGE)
    for measured in main(sys.argv[1], [_case(a) for a in sys.argv[2:]]):
        print(json.dumps(measured), flush=True)
