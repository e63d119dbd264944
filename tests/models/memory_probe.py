"""Measured peaks, in a process of their own: `python -m tests.models.memory_probe MODEL PATH N [N ...]` prints
one line of JSON a length, {"n", "estimate", "peak", "method"}: the bytes the estimate declares and the peak
resident size the computation reached above what the process held just before it (the model loaded and the same
computation run once on a few tokens).

PATH: "analysis", `mha_viz.analyze` as the app runs it (`memory.analysis_need`); "gradient", one
gradient pass of the heads' mask through the model's loss, as `ablation.head_gradients` runs it
(`ablation.gradient_bytes`; for an embedding-only encoder, whose 1 − cosine loss the app never
differentiates, the same pass against a sentence embedding of another text). The peak is VmHWM after
`echo 5 > /proc/self/clear_refs` (freed memory handed back with malloc_trim first, so that the
computation cannot hide in pages the warm-up left behind), or ru_maxrss where clear_refs cannot be
written (then the loading's own peak may hide part of it). `measure` runs it from a test or a
benchmark: one fresh process a model and path, its lengths one after the other, each peak reset, trimmed and
measured from what the process holds before it (about 5 s of start saved a length); where the peak cannot be
reset, one fresh process a length, so that no peak mixes with another's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from mha_viz.budget import resident

PATHS = ("analysis", "gradient")
ROOT = Path(__file__).resolve().parents[2]
PARAGRAPH = ("The old lighthouse stood at the edge of the harbour for more than a hundred years, and every night "
             "its keeper climbed the narrow stairs to light the lamp for the ships coming home. ")


def measure(model: str, path: str, *ns: int, timeout: float = 300) -> dict[int, dict]:
    """{n: {"n", "estimate", "peak", "method"}} of `path` on `model` at each of `ns` tokens, measured in one fresh
    process (`main`); the lengths it could not measure there (no resettable peak), each in a fresh process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MHA_VIZ_MAX_CAPTURE_MB": "1000000", "OMP_NUM_THREADS": "1"}
    out: dict[int, dict] = {}
    while todo := sorted(set(ns) - set(out)):
        done = subprocess.run([sys.executable, "-m", "tests.models.memory_probe", model, path, *map(str, todo)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the probe of {model} {path} at {todo} tokens failed:\n{done.stderr[-3000:]}")
        got = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if not got:
            raise RuntimeError(f"the probe of {model} {path} at {todo} tokens printed nothing:\n{done.stdout[-3000:]}")
        out.update((r["n"], r) for r in got)
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


def main(spec: str, path: str, ns: list[int]) -> Iterator[dict]:
    """Each length's measurement in turn, in this process; only the first where the peak cannot be reset (the
    process's whole peak, ru_maxrss, would mix the lengths' peaks)."""
    import torch

    import mha_viz

    torch.set_num_threads(1)
    model = mha_viz.load_model(spec, device="cpu")
    warm, _ = _computation(model, path, PARAGRAPH * 4, 8)
    warm()  # lazy initialisations (kernels, tokenizer caches) are not the computation's
    for n in ns:
        run, estimate = _computation(model, path, PARAGRAPH * (4 + n // 16), n)
        resident.trim()
        start = resident.resident()
        reset = resident.reset_peak()
        result = run()
        peak = resident.peak(reset) - start
        del result, run
        yield {"n": n, "estimate": int(estimate), "peak": int(peak), "method": "VmHWM" if reset else "ru_maxrss"}
        if not reset:
            return


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] not in PATHS:
        sys.exit(f"usage: python -m tests.models.memory_probe MODEL {'|'.join(PATHS)} N [N ...]")
    for measured in main(sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3:]]):
        print(json.dumps(measured), flush=True)
