"""A long run's layer by the attention kernel (`metrics.row_triton`), the GPU's way: the layer's queries, keys and
values in, its attention output (which the model takes instead of computing its attention again), the head table's
row sums, each row's kept keys and the thumbnails out, with no block of probabilities ever written. Only the
summaries cross to the host (the kept keys through the pinned copier); the queries and keys stay in the spill, on
the device while they fit (`rows.device_room`). On the CPU the kernel runs under Triton's interpreter
(TRITON_INTERPRET=1), which is how the tests prove it equal to the other two ways (`row_kernels`, `row_stats`).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import torch

from mha_viz import settings
from mha_viz.capture.finite import FiniteCheck
from mha_viz.capture.transfer import HostCopier, Staging
from mha_viz.metrics.row_measures import TextFacts, measures_from_sums
from mha_viz_models import LoadedModel


def kernel_runs(model: LoadedModel, device) -> bool:
    """Whether a scan on `device` can take each layer through the kernel: a layer our MHA computes (not an
    encoder–decoder's), with Triton installed, on a GPU, or on CPU tensors under Triton's interpreter."""
    device = torch.device(device)
    usable = device.type == "cuda" or (device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")
    return (usable and model.can_recompute and not model.is_encoder_decoder
            and importlib.util.find_spec("triton") is not None)


def kernel_by_default(model: LoadedModel) -> bool:
    """Whether `scan` takes the kernel unasked: on a GPU where it can (`kernel_runs`), with MHA_VIZ_SCAN_KERNEL=1.
    Not by default: on one H200 the blocks were faster (docs/speed.md). Should the kernel fail there (a GPU it
    cannot compile for), the scan goes on by blocks."""
    return settings.from_env().scan_kernel and model.device.type == "cuda" and kernel_runs(model, model.device)


def kernel_layer(proj, values: torch.Tensor | None, facts: TextFacts, *, top_k: int, min_weight: float, thumb: int,
                 out: tuple[np.ndarray, np.ndarray, np.ndarray], check: FiniteCheck, where: str,
                 staging: type[Staging] = Staging) -> tuple[dict[str, np.ndarray], np.ndarray, torch.Tensor | None]:
    """One layer (`rows.projected`: its MHA, q (1, H, n, d), k (1, G, n, d); `values` (1, G, n, d_v), or None where
    the model computes its own output) -> (its measures, the thumbnails (H, s, s), its attention output
    (1, H, n, d_v) float32 or None). The kept keys, weights and rest are written into `out` (the scan's arrays
    for this layer)."""
    from mha_viz.metrics import row_triton  # its kernels are written and compiled at the first call

    mha, q, k = proj
    v = values if values is not None else k  # no output wanted: any values of the right length (ignored)
    done = row_triton.rows_of(q[0], k[0], v[0], facts, scale=mha.scale, softcap=mha.softcap or 0.0,
                              window=mha.window or 0, chunk=mha.chunk or 0, sinks=mha.sinks, top_k=top_k,
                              min_weight=min_weight, thumb=thumb)
    check.see(done.rows[..., row_triton.BUILT_IN.index("total"), None], where)  # NaN or infinity reach the sums
    keys, weights, rest = out
    with HostCopier(keys.view(np.float32), staging) as copier:  # int32 keys cross as their bits
        copier.put(slice(None), done.keys.view(torch.float32))
    with HostCopier(weights, staging) as copier:
        copier.put(slice(None), done.weights)
    with HostCopier(rest, staging) as copier:
        copier.put(slice(None), done.rest)
    sums = row_triton.sums_of(done.rows, facts)
    measures = measures_from_sums(sums, facts.n, facts.table)
    return measures, done.cells.cpu().numpy(), done.out[None] if values is not None else None
