"""`scan`: every head of a long text in one pass, up to the model's whole context, without any head's
n × n matrix: the model runs once (lean capture); as each attention layer's input arrives, that layer's
probabilities are computed a block of query rows at a time, all heads together on the model's device, and
reduced to the head table's measures, each row's heaviest keys and the thumbnails (`metrics.row_kernels` on the
CPU; `metrics.row_stats` and `kept` elsewhere) as they pass; on a GPU with Triton, one kernel a layer computes the
attention and all of these without writing any block (`kernel_layer`); where the model takes given outputs, each block's
product with the values makes the layer's output, which the model uses instead of computing its attention a second time
(`mha_viz_models.reading.given`), and what each head writes is measured from it. The queries and keys go to a
temporary file, from which `Scan.rows` recomputes exact rows.

Memory: O(layers · heads · n · top_k) for the kept keys, plus the forward's own, one layer's queries and
keys and one block (`rows.CPU_BLOCK_BYTES`, `rows.GPU_BLOCK_BYTES`).
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from mha_viz.budget.time_left import TimeLeft, say
from mha_viz.capture.finite import FiniteCheck
from mha_viz.capture.own_outputs import OwnOutputs
from mha_viz.compiled import run_all, thread_count
from mha_viz.metrics.head_stats import pattern_columns
from mha_viz.metrics.output_norms import output_norms
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import TextFacts, measures_from_sums
from mha_viz.metrics.row_stats import RowStats
from mha_viz.progress import Progress
from mha_viz.scan.eager import check_eager, eager_layers
from mha_viz.scan.kept import THUMB, TOP_K, Thumbnails, TopKeys
from mha_viz.scan.kernel_layer import kernel_by_default, kernel_layer, kernel_runs
from mha_viz.scan.own_later import LaterOwn, own_of
from mha_viz.scan.result import Scan
from mha_viz.scan.rows import Block, RowSource, block_jobs, lean_layers, rows_per_block, split_rows
from mha_viz.scan.torch_threads import on_one_torch_thread, one_torch_thread_each
from mha_viz.text.tokenize import InputError, Tokens, tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.loading import effective_run

log = logging.getLogger(__name__)


class _Layer:
    """What one layer's blocks are reduced to: by one compiled pass on the CPU (`row_kernels.BlockSums`),
    by tensor operations elsewhere (`metrics.row_stats`, `kept`). `out`: the scan's (keys, weights, rest) of this
    layer."""

    def __init__(self, facts: TextFacts, heads: int, top_k: int, min_weight: float, thumb: int, device,
                 compiled: bool, out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.compiled, self.out = compiled, out
        if compiled:
            self.sums = BlockSums(heads, facts, top_k=top_k, min_weight=min_weight, thumb=thumb,
                                  threads=thread_count(), out=out)
        else:
            self.stats = RowStats(facts, heads, device)
            self.top = TopKeys(heads, facts.n, top_k, min_weight, device)
            self.thumbs = Thumbnails(heads, facts.n, thumb, device)

    def add_all(self, jobs: Sequence[Callable[[], Block]], device, check: FiniteCheck, where: str) -> None:
        """Each block that `jobs` make (a call each), computed and reduced: on the CPU by `reduce_blocks`' workers,
        elsewhere one after the other on `device`."""
        if self.compiled:
            reduce_blocks(jobs, self.sums)
            return
        for job in jobs:
            first, key_start, probs = job()
            self.add(first, key_start, probs.to(device), check, where)

    def add(self, first: int, key_start: int, probs: torch.Tensor, check: FiniteCheck, where: str) -> None:
        probs = probs.float()
        if self.compiled:  # NaN or infinity anywhere in a row reaches its sum: `finish` checks them
            self.sums.add(np.ascontiguousarray(probs.cpu().numpy()), first, key_start)
            return
        row_sums = self.stats.add(probs, first, key_start)  # (H, b)
        check.see(row_sums[..., None], where)
        self.top.add(probs, first, key_start, row_sums)
        self.thumbs.add(probs, first, key_start)

    def finish(self, check: FiniteCheck, where: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(measures, cells (H, s, s)); the kept keys, weights and rest are in `out`."""
        if self.compiled:
            sums, cells = self.sums.finish()
            keys, weights, rest = self.out
            check.see(torch.from_numpy(weights.sum(-1) + rest)[..., None], where)  # each row's sum
            return measures_from_sums(sums, self.sums.n, self.sums.table), cells
        for mine, theirs in zip((self.top.keys, self.top.weights, self.top.rest), self.out):
            theirs[...] = mine.cpu().numpy()
        return self.stats.finish(), self.thumbs.cells.cpu().numpy()


def _given(block: Block) -> Block:
    return block


def _made_rows(first: int, make: Callable[[], np.ndarray]) -> Block:
    """A block of a model of effective layers alone (`effective_run.row_blocks`), made now: over the keys from 0."""
    return first, 0, torch.from_numpy(make())


def reduce_blocks(jobs: Sequence[Callable[[], Block]], sums: BlockSums) -> None:
    """Make each block of `jobs` (a call each: (first row, first key, probabilities (H, b, w))) and add it to
    `sums`, on `sums.threads` workers at once (`compiled.run_all`): each takes the next job, computes it with
    one PyTorch thread (`one_torch_thread_each`) and reduces it whole on its own thread into a part of `sums` of
    its own. The block's product, softmax and reduction of one worker overlap the others', with no thread
    waiting for another between them (PyTorch forking each operation over the cores, then the compiled loop's
    threads, left each core idle at every hand-over). The caller holds what the jobs need (the model's lock)."""
    pending, take, failed = iter(jobs), threading.Lock(), threading.Event()

    def work(part: int) -> None:
        while not failed.is_set():
            with take:
                job = next(pending, None)
            if job is None:
                return
            try:
                first, key_start, probs = job()
                sums.add(np.ascontiguousarray(probs.float().cpu().numpy()), first, key_start, part)
            except BaseException:
                failed.set()
                raise
    if sums.threads == 1:
        work(0)
        return
    with one_torch_thread_each() as count:
        run_all(partial(on_one_torch_thread, work), [(part, count) for part in range(sums.threads)])


def scan(model: LoadedModel, text: str, *, top_k: int = TOP_K, min_weight: float = 0.005, thumb: int = THUMB,
         max_tokens: int | None = None, device=None, progress: Progress | None = None,
         compiled: bool | None = None, tokens: Tokens | None = None, own_attention: bool = False,
         keep_own: bool = True, kernel: bool | None = None) -> Scan:
    """Every head of `text` (up to the model's whole context; `max_tokens` caps it, and so does a
    public server's MHA_VIZ_MAX_OVERVIEW_TOKENS): the head table's pattern measures, thumbnails
    pooled to `thumb` × `thumb`, each row's `top_k` heaviest keys of weight ≥ `min_weight`, and exact
    rows on demand (`Scan.rows`).

    device: where to reduce the blocks (default the model's). compiled: reduce each block in one
    compiled pass on the CPU (`metrics.row_kernels`), or by tensor operations on `device`; None: the
    first on the CPU. Both give the same scan within float32 rounding. tokens: the text already tokenized
    (`tokenize`; an analysis's, cut to its own limit), instead of `text` up to the model's whole context.
    keep_own: keep what the model's own loss and last logits (an encoder's embedding) are read from, its last hidden
    states, with each head's mean output (`Scan.own`, what Switch heads off reads; float32, where the forward took
    each layer's output from the blocks). A decoder's LM head runs at their first read (`own_later`): it took
    2.6–3.8 s of the first page's 58–67 s at 8,192 tokens of SmolLM2 on 2 cores.
    kernel: each layer's attention, measures, kept keys and thumbnails in one Triton kernel on the model's device
    (`metrics.row_triton`, `kernel_layer`), no block of probabilities written; None: with MHA_VIZ_SCAN_KERNEL=1, on a
    GPU with Triton installed, for a model our MHA computes (True on the CPU runs it under Triton's interpreter,
    TRITON_INTERPRET=1: the tests).
    own_attention: the model computes its own fused attention and the blocks are computed beside it, instead of
    the model taking each layer's output from them (`LoadedModel.takes_outputs`): the way before, a benchmark's
    baseline (the output measures are then left out of the table).
    progress(fraction, message) is called
    after each layer, the message with the time left from the pace of the layers done (`budget.time_left`).
    A family our MHA cannot compute (DeBERTa, MLA, an encoder–decoder's encoder…) is read through its own
    attention one layer at a time when one layer's probabilities fit the capture budget
    (MHA_VIZ_MAX_CAPTURE_MB), else refused with the length that fits (InputError). Raises
    NotFiniteError (`mha_viz.capture.finite`) for a head whose probabilities hold NaN or infinity.
    """
    if top_k < 1 or thumb < 1 or not 0 <= min_weight <= 1:
        raise InputError(f"top_k and thumb must be at least 1 and min_weight within 0 … 1 "
                         f"(got top_k={top_k}, thumb={thumb}, min_weight={min_weight}).")
    toks = tokens or tokenize(model, text, max_tokens, whole_text=True)
    progress = progress or (lambda _f, _m: None)
    where = torch.device(device) if device is not None else model.device
    facts = TextFacts.of(toks.display, toks.ids, toks.special, causal=model.is_causal)
    L, H = model.num_layers, model.num_heads
    compiled = where.type == "cpu" if compiled is None else compiled
    use_kernel = kernel_by_default(model) if kernel is None else kernel
    kernel_on = [True] if use_kernel else []  # emptied if a kernel the scan chose itself fails
    if use_kernel and not kernel_runs(model, model.device):
        raise InputError(f"The attention kernel cannot scan '{model.name}' on {model.device}: it needs Triton and a "
                         f"GPU (or TRITON_INTERPRET=1 on the CPU), and a model our MHA computes.")
    keys = np.full((L, H, toks.n, top_k), -1, np.int32)  # written in place, layer by layer
    weights, rest = np.zeros((L, H, toks.n, top_k), np.float32), np.zeros((L, H, toks.n), np.float32)
    check = FiniteCheck(model)
    names = [f"attention in layer {number}" for number in model.layer_ids]
    finished, written = [], []  # each layer's (measures, thumbnails), and its heads' output norms where made
    means: list[torch.Tensor] = []  # each layer's head outputs averaged over the tokens, (H, d_v), where made
    own: list[OwnOutputs | LaterOwn] = []  # what the model itself says of the text (`own_outputs.from_hidden`)
    clock = TimeLeft(L)  # the layers cost about the same; the first holds the forward's start

    def in_order(layer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The scan's (keys, weights, rest) of `layer`, the next layer to finish."""
        if layer != len(finished):
            raise InputError(f"'{model.name}' ran its attention layers out of order (layer {layer} after "
                             f"{len(finished)} others), so it cannot be scanned.")
        return keys[layer], weights[layer], rest[layer]

    def done(layer: int, result: tuple[dict[str, np.ndarray], np.ndarray]) -> None:
        finished.append(result)
        progress((layer + 1) / L, f"Layer {layer + 1} of {L} done · {say(clock.step())}")

    def reduce(layer: int, jobs: Sequence[Callable[[], Block]]) -> None:
        """One layer's blocks (`jobs` make them), by a reducer made now and dropped after (its scratch and, on a
        GPU, its kept keys are one layer's)."""
        reducer = _Layer(facts, H, top_k, min_weight, thumb, where, compiled, in_order(layer))
        reducer.add_all(jobs, where, check, names[layer])
        done(layer, reducer.finish(check, names[layer]))

    if model.can_recompute and not model.is_encoder_decoder:
        progress(0.0, f"Running {model.name} on {toks.n} tokens with fused attention, each layer as it runs…")

        def on_input(layer: int, proj, values: torch.Tensor | None) -> torch.Tensor | None:
            """Inside the forward, one layer's queries and keys at a time; with `values`, each block's product
            with them too: the layer's output, which the model then takes (`lean_layers`)."""
            out = None
            if kernel_on:  # the layer's attention, measures, kept keys and thumbnails in one kernel
                try:
                    *result, out = kernel_layer(proj, values, facts, top_k=top_k, min_weight=min_weight,
                                                thumb=thumb, out=in_order(layer), check=check, where=names[layer])
                    done(layer, tuple(result))
                except Exception as exc:  # noqa: BLE001 - chosen, not asked for: a kernel this GPU cannot compile
                    if kernel:  # or run leaves the scan to the blocks, from this layer on
                        raise
                    log.warning("%s: the attention kernel failed on layer %d (%s); the scan goes on by blocks",
                                model.name, layer, exc)
                    kernel_on.clear()
            if not kernel_on:
                jobs, out = block_jobs(model, proj, values, toks.n)
                reduce(layer, jobs)
            check.verify()
            if out is not None:  # what each head writes, from the outputs just made (the table's output measures)
                written.append(output_norms(out[0], proj[0].head_weights()["W_O"]))
                if keep_own:  # what mean-ablation puts in, read only with the model's own outputs
                    means.append(out[0].mean(1))
            return out

        def on_last(hidden: torch.Tensor) -> None:
            """The model's loss and last logits (made at their first read: `own_later`) or an encoder's embedding from
            its last hidden states, with each head's mean output: where `ablation_outcome.from_run` can read them
            (float32, every head's mean made) and the caller wants them (`keep_own`)."""
            if keep_own and model.dtype == torch.float32 and len(means) == L:
                found = own_of(model, hidden, list(toks.ids), torch.stack(means).cpu().numpy())
                own.extend([found] if found is not None else [])
        spill = lean_layers(model, toks.ids, on_input, outputs=not own_attention, on_last=on_last)
        source = RowSource(model, toks.ids, spill)
    elif model.effective:  # Mamba-2, xLSTM: each layer's |A|, rows normalised, a block of rows at a time
        progress(0.0, f"Running {model.name} on {toks.n} tokens, each layer's effective attention a block of rows "
                      "at a time…")
        for layer, jobs in effective_run.row_blocks(model, toks.ids):
            reduce(layer, [partial(_made_rows, first, make) for first, _last, make in jobs])
        check.verify()
        source = RowSource(model, toks.ids)
    else:
        check_eager(model, toks.n)
        progress(0.0, f"Running {model.name} on {toks.n} tokens, one layer's attention at a time…")
        eager_layers(model, toks.ids, lambda layer, probs: reduce(
            layer, [partial(_given, block) for block in split_rows(probs, rows_per_block(probs.device, H, toks.n))]))
        check.verify()
        source = RowSource(model, toks.ids)
    if len(finished) != L:
        raise InputError(f"'{model.name}' handed over the attention of {len(finished)} of its {L} layers as it "
                         f"ran, so it cannot be scanned.")
    stats = {name: np.stack([f[0][name] for f in finished]) for name in finished[0][0]}
    table = pd.DataFrame(pattern_columns(stats, model.layer_ids, toks.n))
    if len(written) == L:
        for name in written[0]:
            table[name] = np.concatenate([w[name] for w in written])
    return Scan(tokens=toks.display, token_ids=list(toks.ids), special_mask=list(toks.special),
                model_name=model.name, layer_ids=model.layer_ids, is_causal=model.is_causal, table=table,
                pooled=np.stack([f[1] for f in finished]), keys=keys, weights=weights, rest_mass=rest,
                top_k=top_k, min_weight=min_weight, num_input_tokens=toks.total,
                num_input_tokens_is_estimate=toks.total_is_estimate, precision=model.precision, row_source=source,
                own=own[0] if own else None)
