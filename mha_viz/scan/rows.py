"""A long text's probabilities a block of query rows at a time, every head of a layer together, on
the model's device, so that no head's n × n matrix is ever whole: recomputed by our MHA from each
layer's queries and keys as the model runs (`lean_layers`, `recomputed_blocks`), or, for a family it cannot
compute, taken from the model's own attention one layer at a time (`scan.eager`). `RowSource` gives
one head's exact rows on demand (`Scan.rows`), from the queries and keys spilled to a file (`QKSpill`).
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Callable, Iterator

import numpy as np
import torch

from mha_viz.capture.transfer import HostCopier, Staging
from mha_viz.scan.eager import eager_layers
from mha_viz.scan.spill import QKSpill
from mha_viz_models import LoadedModel
from mha_viz_models.attention.heads import kv_head
from mha_viz_models.attention.visibility import visible_span
from mha_viz_models.loading import effective_run
from mha_viz_models.reading.records import Capture, LayerInput

# Bytes of one block's float32 probabilities (every head of a layer × its rows × their keys): on the
# CPU about the last-level cache, so each pass over a block stays in it; on a GPU large enough to
# keep it busy.
CPU_BLOCK_BYTES = 8 * 2**20
DEVICE_RESERVE = 2 * 2**30  # of a GPU's free memory, left to the views' blocks and other sessions
GPU_BLOCK_BYTES = 512 * 2**20

KEPT = 2  # the last results `RowSource` keeps: a page asks for a window and a whole row on each rerun
Block = tuple[int, int, torch.Tensor]  # (first row, first key, probabilities (H, b, w) float32)


def rows_per_block(device, heads: int, n: int) -> int:
    """How many query rows a block holds on `device` for `heads` heads over n keys."""
    budget = CPU_BLOCK_BYTES if torch.device(device).type == "cpu" else GPU_BLOCK_BYTES
    return max(1, min(n, budget // (4 * heads * n)))


Projected = tuple  # (our MHA of the layer, q (1, H, n, d_k), k (1, G, n, d_k)), RoPE and any norm after it applied


def projected(model: LoadedModel, capture, layer: int) -> Projected:
    """One layer's queries and keys from a lean capture of its input (`LoadedModel.projections`), and the
    MHA that computes its probabilities from them."""
    mha, q, k, _v, _padding = model.projections(capture, layer)  # (1, H, n, d_k), (1, G, n, d_k)
    return mha, q, k


def block_spans(model: LoadedModel, mha, n: int, heads: int, start: int = 0, stop: int | None = None, *,
                device=None) -> list[tuple[int, int, int, int]]:
    """(first row, last row + 1, first key, last key + 1) of each block of rows `start` … `stop` − 1 of a layer
    (`mha`) of `heads` heads over n keys on `device` (default the model's): each block's queries against the keys
    they may see (`visible_span`)."""
    stop = n if stop is None else stop
    step = rows_per_block(model.device if device is None else device, heads, n)
    spans = []
    for first in range(start, stop, step):
        last = min(first + step, stop)
        spans.append((first, last, *visible_span(first, last, n, causal=model.is_causal, window=mha.window,
                                                 chunk=mha.chunk)))
    return spans


def block_probabilities(model: LoadedModel, proj: Projected, span: tuple[int, int, int, int], *,
                        heads: list[int] | None = None, q_start: int = 0) -> Block:
    """One block (`block_spans`) of a layer's probabilities from its queries and keys (`projected`; of `heads`
    when q and k hold only theirs, default every head; q's first row is row `q_start`): (first row, first key,
    (h, b, w)), without the model's lock: the caller holds it, or another thread that waits for this one does (the
    scan's forward)."""
    mha, q, k = proj
    first, last, k0, k1 = span
    with torch.inference_mode():
        probs = mha.row_probabilities(q[:, :, first - q_start:last - q_start], k[:, :, k0:k1], first=first,
                                      key_start=k0, is_causal=model.is_causal, heads=heads)  # (1, h, b, w)
    return first, k0, probs[0]


def with_output(job: Callable[[], Block], values: torch.Tensor, out: torch.Tensor) -> Block:
    """The block `job` makes, after writing its rows of the layer's attention output: `out` (1, H, n, d_v) gets
    probabilities (H, b, w) times the values (1, G, n, d_v) of their keys, query head h reading KV head
    h // (H / G). Blocks write disjoint rows, so workers may run them at once."""
    first, key_start, probs = job()
    heads, b, w = probs.shape
    groups, d = values.shape[1], values.shape[-1]
    with torch.inference_mode():  # a worker's thread is not in the forward's mode
        # (G, group · b, w) @ (G, w, d): one product a KV head, its query heads' rows stacked (a broadcast
        # over the query heads would copy the values once a block)
        mixed = torch.bmm(probs.float().reshape(groups, heads // groups * b, w), values[0, :, key_start:key_start + w])
        out[0, :, first:first + b] = mixed.view(heads, b, d)
    return first, key_start, probs


def block_jobs(model: LoadedModel, proj: Projected, values: torch.Tensor | None, n: int
               ) -> tuple[list[Callable[[], Block]], torch.Tensor | None]:
    """Every block of a layer's probabilities (`block_spans`) as a job (a call makes it) and, given the layer's
    `values`, its attention output (1, H, n, d_v) float32, which the jobs fill as they run (`with_output`)."""
    jobs = [partial(block_probabilities, model, proj, span)
            for span in block_spans(model, proj[0], n, model.num_heads)]
    if values is None:
        return jobs, None
    out = torch.empty((1, model.num_heads, n, values.shape[-1]), dtype=torch.float32, device=values.device)
    values = values.float().contiguous()  # a projection's transposed view: each block's product would gather it
    return [partial(with_output, job, values, out) for job in jobs], out


def _outputs_only(model: LoadedModel, n: int):
    """`lean_layers`' on_layer making each layer's output as a scan's forward did (same blocks, same numbers)."""
    def on_layer(_layer: int, proj: Projected, values: torch.Tensor | None) -> torch.Tensor | None:
        jobs, out = block_jobs(model, proj, values, n)
        for job in jobs if out is not None else ():
            job()
        return out
    return on_layer


def recomputed_blocks(model: LoadedModel, proj: Projected, *, heads: list[int] | None = None,
                      start: int = 0, stop: int | None = None, n: int | None = None,
                      picked: bool = False) -> Iterator[Block]:
    """One layer's probabilities (of `heads`, default all) from its queries and keys (`projected`), rows
    `start` … `stop` − 1 of n a block at a time: each block of queries against the keys it may see
    (`visible_span`), under the model's lock. `picked`: q and k hold only `heads` (`QKSpill.rows`), q only rows
    `start` … `stop` − 1 and k at least the keys those rows see (n: the text's length, then given)."""
    mha, q, k = proj
    if heads is not None and not picked:  # query head h reads KV head h // (H / G)
        q, k = q[:, list(heads)], k[:, [kv_head(h, model.num_heads, model.num_kv_heads) for h in heads]]
    heads = list(range(model.num_heads)) if heads is None else list(heads)
    n = q.shape[-2] if n is None else n
    for span in block_spans(model, mha, n, len(heads), start, stop, device=q.device):
        with model.lock:
            made = [block_probabilities(model, (mha, q, k), span, heads=heads, q_start=start if picked else 0)]
        yield made.pop()  # this frame keeps no block while the caller holds it


def split_rows(layer_probs: torch.Tensor, step: int) -> Iterator[Block]:
    """A whole layer's probabilities (H, n, n) as blocks of `step` rows (all keys)."""
    for first in range(0, layer_probs.shape[1], step):
        yield first, 0, layer_probs[:, first:first + step]


def device_room(device) -> int:
    """How many bytes of a long run's queries and keys may stay where they were computed: on a GPU, its
    free memory now less a reserve (DEVICE_RESERVE, or a tenth of the GPU, for the views' blocks and other
    sessions); on the CPU none (they go to a file: the process's memory is every session's)."""
    device = torch.device(device)
    if device.type != "cuda":
        return 0
    free, total = torch.cuda.mem_get_info(device)
    return max(0, free - max(DEVICE_RESERVE, total // 10))


def layer_capture(layer: int, inp: LayerInput) -> Capture:
    """A lean capture of one unpadded text that holds one layer's input (for `projected`)."""
    return Capture(None, None, None, None, layer_inputs={layer: inp}, attention_mask=None)


def lean_layers(model: LoadedModel, token_ids: list[int],
                on_layer: Callable[[int, Projected, torch.Tensor | None], torch.Tensor | None] | None = None,
                *, outputs: bool = True, on_last: Callable[[torch.Tensor], None] | None = None) -> QKSpill:
    """Run the model once; as each attention layer's input arrives, project its queries and keys, spill them and
    hand `on_layer(layer, projected, values)` the layer to reduce, inside the forward (one layer's in memory at a
    time). Where the model takes given outputs (`LoadedModel.takes_outputs`), the queries, keys and values
    (1, G, n, d_v) are those the layer's module computed, and `on_layer` returns its attention output
    (1, H, n, d_v), which the layer uses instead of computing its attention again; elsewhere (or with `outputs`
    False) `values` is None and the model runs its fused attention. on_last: called with the base model's last
    hidden states (n, d) once the forward is over, before they are let go. Returns the spill (`RowSource`)."""
    spill = QKSpill(keep_bytes=device_room(model.device))
    gives = on_layer is not None and model.takes_outputs and outputs

    def kept(layer: int, inp: LayerInput, mha, q, k, v) -> torch.Tensor | None:
        spill.put(layer, q, k, v, inp.hidden)
        if inp.position_embeddings is not None:
            spill.rotated.add(layer)
        return None if on_layer is None else on_layer(layer, (mha, q, k), v if gives else None)

    def arrived(layer: int, inp: LayerInput):
        if gives:  # made from the module's own queries, keys and values, when it computes them (`given.Maker`)
            return partial(from_module, layer, inp)
        mha, q, k, v, _padding = model.projections(layer_capture(layer, inp), layer)
        return kept(layer, inp, mha, q, k, v)

    def from_module(layer: int, inp: LayerInput, query, key, value, kwargs: dict) -> torch.Tensor | None:
        """The layer's output from the queries, keys and values its module just computed (its projection, not a
        second one of ours: 1.9 s of SmolLM2's 8,192 tokens on 2 cores), or ours where the module's are not what our
        MHA would compute from (other shapes, or a scale of its own)."""
        mha = model.layer_adapter(layer).mha
        scale = kwargs.get("scaling")
        shapes = (query.shape[1], query.shape[-1], key.shape[-1], value.shape[-1], key.shape[-2], value.shape[1])
        if (shapes != (model.num_heads, mha.d_k, mha.d_k, mha.d_v, query.shape[-2], key.shape[1])
                or model.num_heads % key.shape[1] or (scale is not None and abs(scale - mha.scale) > 1e-6 * mha.scale)):
            _mha, query, key, value, _padding = model.projections(layer_capture(layer, inp), layer)
        return kept(layer, inp, mha, query, key, value)
    done = model.capture(torch.tensor([token_ids]), lean=True, head_outputs=False, on_input=arrived,
                         gives_outputs=gives)
    if on_last is not None:
        on_last(done.hidden[0])
    spill.written()  # a write that failed fails the run
    return spill


def host_part(probs: torch.Tensor, staging: type[Staging] = Staging) -> np.ndarray:
    """A block of rows (h, b, m) as float32 on the host: a contiguous float32 CPU block's own memory (nothing
    copied), else a copy, a GPU's through the pinned copier (`capture.transfer`; `staging` stands in for CUDA's in
    tests), so only the rows a view draws ever cross."""
    if (not staging.stages(probs.device) and probs.device.type == "cpu" and probs.dtype == torch.float32
            and probs.is_contiguous()):
        return probs.numpy()
    part = np.empty((1, *probs.shape), dtype=np.float32)
    with HostCopier(part, staging) as copier:
        copier.put(0, probs)
    return part[0]


def widened(part: np.ndarray, k0: int, n: int) -> np.ndarray:
    """A block of rows (h, b, m) over keys k0 … k0 + m − 1 as (h, b, n): every key, those it does not span 0."""
    h, b, m = part.shape
    if k0 == 0 and m == n:
        return part
    block = np.zeros((h, b, n), dtype=np.float32)
    block[:, :, k0:k0 + m] = part
    return block


class RowSource:
    """One head's exact rows on demand (`Scan.rows`): from the layer inputs a scan spilled (spilled again
    by one more run at the first call when not given: a reopened scan), or, for a family our MHA cannot
    compute, from the model's own attention."""

    def __init__(self, model: LoadedModel, token_ids: list[int], spill: QKSpill | None = None,
                 staging: type[Staging] = Staging) -> None:
        self.model, self.token_ids, self.spill = model, list(token_ids), spill
        self.staging = staging  # how a block leaves a GPU (`host_part`)
        self._making = threading.Lock()  # one run makes the spill, however many threads ask at once
        # (layer, head, start, stop) -> rows, the last KEPT asked, oldest first
        self._last: dict[tuple[int, int, int, int], np.ndarray] = {}

    def __call__(self, layer: int, head: int, start: int, stop: int) -> np.ndarray:
        asked = (layer, head, start, stop)
        rows = self._last.get(asked)
        if rows is None:
            rows = np.zeros((stop - start, len(self.token_ids)), dtype=np.float32)
            for first, block in self.blocks(layer, [head], start, stop):
                rows[first - start:first - start + block.shape[1]] = block[0]
            rows.flags.writeable = False  # shared by the calls that ask for it again
        last = {k: v for k, v in self._last.items() if k != asked}  # a new dict: other threads read the old one
        self._last = dict(list(last.items())[-(KEPT - 1):] + [(asked, rows)])
        return rows

    def spilled(self) -> QKSpill:
        """The spill; a reopened scan's made by one more run (its own blocks), once however many threads ask."""
        with self._making:
            if self.spill is None:
                self.spill = lean_layers(self.model, self.token_ids, _outputs_only(self.model, len(self.token_ids)))
        return self.spill

    def _rows_of(self, layer: int, heads: list[int] | None, start: int, stop: int) -> Projected:
        """What rows start … stop − 1 of `heads` of a layer are recomputed from (`recomputed_blocks`, picked): the
        layer's MHA, those rows' queries and the keys they see, read alone from the spill (`QKSpill.rows`)."""
        model, n = self.model, len(self.token_ids)
        mha = model.layer_adapter(layer).mha
        keys = visible_span(start, stop, n, causal=model.is_causal, window=mha.window, chunk=mha.chunk)[1]
        return (mha, *self.spilled().rows(layer, model.device, None if heads is None else list(heads),
                                          (start, stop), keys))

    def outputs(self, layer: int, head: int, start: int, stop: int) -> np.ndarray:
        """float32 (stop − start, d_v): head `head`'s output z = probabilities × values of query rows
        start … stop − 1 of one layer, from its spilled queries, keys and values, a block of rows at a time."""
        model = self.model
        if not model.can_recompute or model.is_encoder_decoder:
            raise ValueError(f"The heads' outputs of a long run of '{model.name}' are not kept: our MHA cannot "
                             f"compute its attention ({model.stand_in or model.unread}).")
        spill = self.spilled()
        values = spill.values(layer, model.device)
        proj = self._rows_of(layer, [head], start, stop)
        kv = kv_head(head, model.num_heads, model.num_kv_heads)
        z = np.empty((stop - start, values.shape[-1]), dtype=np.float32)
        for first, k0, probs in recomputed_blocks(model, proj, heads=[head], start=start, stop=stop,
                                                  n=len(self.token_ids), picked=True):
            with torch.inference_mode():
                rows = probs[0].float() @ values[0, kv, k0:k0 + probs.shape[-1]].float()  # (b, d_v)
            z[first - start:first - start + rows.shape[0]] = rows.cpu().numpy()
        return z

    def blocks(self, layer: int, heads: list[int] | None, start: int, stop: int
               ) -> Iterator[tuple[int, np.ndarray]]:
        """Rows start … stop − 1 of `heads` (None: every head) of one layer as (first row, float32
        (h, b, n)) blocks, every key of each row, from the layer's spilled queries and keys: a whole head
        (or layer) streams through without its n × n."""
        n = len(self.token_ids)
        for first, k0, part in self.spans(layer, heads, start, stop):
            yield first, widened(part, k0, n)

    def spans(self, layer: int, heads: list[int] | None, start: int, stop: int
              ) -> Iterator[tuple[int, int, np.ndarray]]:
        """`blocks` as (first row, first key k0, float32 (h, b, m)): each block over only the keys k0 … k0 + m − 1
        its rows may see (`visible_span`; the others are 0), as computed: a causal head's block of rows skips the
        keys after it, and is not widened; a contiguous CPU block is its own memory (`host_part`)."""
        model, n = self.model, len(self.token_ids)
        if model.effective:  # the layer's effective attention made again, a block of rows at a time
            yield from effective_spans(model, self.token_ids, layer, heads, start, stop)
            return
        if not model.can_recompute or model.is_encoder_decoder:
            kept: list[torch.Tensor] = []
            pick = slice(None) if heads is None else list(heads)
            eager_layers(model, self.token_ids, lambda _layer, p: kept.append(p[pick, start:stop].cpu()),
                         only=layer)
            yield start, 0, np.ascontiguousarray(kept[0].numpy(), dtype=np.float32)
            return
        proj = self._rows_of(layer, heads, start, stop)
        for first, k0, probs in recomputed_blocks(model, proj, heads=heads, start=start, stop=stop, n=n, picked=True):
            part = host_part(probs, self.staging)
            del probs  # not kept while the caller holds the block (`part` may be its memory)
            yield first, k0, part


def effective_spans(model: LoadedModel, token_ids: list[int], layer: int, heads: list[int] | None, start: int,
                    stop: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """`RowSource.spans` of a model of effective layers alone: one more forward, then only the layer's blocks of
    rows that hold start … stop − 1 made (`effective_run.row_blocks`), over the keys each row sees."""
    (_number, jobs), = effective_run.row_blocks(model, token_ids, only=layer)
    pick = slice(None) if heads is None else list(heads)
    for first, last, make in jobs:
        lo, hi = max(start, first), min(stop, last)
        if lo < hi:
            yield lo, 0, np.ascontiguousarray(make()[pick, lo - first:hi - first])


class Reader:
    """A long run's `source`: a `head_rows.Blocks` reader of a `RowSource` (`blocks`) that also reads its `spans`
    (`head_rows.spans_of` finds them)."""

    def __init__(self, source: RowSource) -> None:
        self.source = source

    def __call__(self, layer: int, heads: list[int] | None, start: int, stop: int
                 ) -> Iterator[tuple[int, np.ndarray]]:
        return self.source.blocks(layer, heads, start, stop)

    def spans(self, layer: int, heads: list[int] | None, start: int, stop: int
              ) -> Iterator[tuple[int, int, np.ndarray]]:
        return self.source.spans(layer, heads, start, stop)
