"""What each heavy computation besides an analysis declares to the admission (`admission.Admission.hold`):
one `memory.Need` a path, from the estimates its own module writes (`memory.analysis_need`,
`ablation.gradient_bytes`, the scan's blocks), so that two of them are never admitted together onto memory that
holds one. Here: what several features run (an analysis, a generation, the scan) and the pieces a
need is made of (a forward's and `on_device` are `budget/plan`'s); a feature's own jobs are planned in its folder
(`features/<id>/plan.py`); the estimate, patching and circuits of three pages are `circuits/need.py`; a run's
downloads are `export/downloads.py`'s.

Working memory is where the model runs (`budget.plan.on_device`: the GPU's for a model on CUDA, else the host's);
what a result keeps is the host's.
"""

from __future__ import annotations

from mha_viz.budget import memory
from mha_viz.budget.plan import forward, on_device
from mha_viz.capture import head_rows, own_outputs
from mha_viz.capture.grown_rows import recorded_bytes
from mha_viz.compiled import thread_count
from mha_viz.scan import rows as scan_rows
from mha_viz.scan.kept import THUMB, TOP_K
from mha_viz_models import LoadedModel
from mha_viz_models.loading import effective_run

Need = memory.Need


def larger(*needs: Need) -> Need:
    """The need of computations that run one after another: the largest of each at every place."""
    device = next((n.device for n in needs if n.device), "")
    return Need(host=max(n.host for n in needs), gpu=max(n.gpu for n in needs), device=device,
                attention=max(n.attention for n in needs))


def generation(model: LoadedModel, n: int, new: int = 0, *, long: bool | None = None) -> Need:
    """A generation whose prompt and `new` tokens come to n: every head's attention recorded into one
    (L, H, n, n) array, with the prompt's forward and the KV cache: about what an analysis of n tokens holds.
    A long one (`long`; None: past MHA_VIZ_DENSE_MB, `capture.generation`; never for a model of effective layers
    alone, whose need is its analysis'): the prompt's fused forward, then one
    scan of n tokens (the larger), beside the new tokens' rows it keeps (`grown_rows.recorded_bytes`)."""
    L, H = model.num_layers, model.num_heads
    dense = bool(model.effective) or (head_rows.held_densely(L, H, n) if long is None else not long)
    if dense:  # a model of effective layers alone: each step's capture makes one layer's matrices beside the rows
        return analysis(model, n) if model.effective else memory.analysis_need(model, n)
    work = larger(forward(model, n), scan(model, n))
    return Need(host=work.host + recorded_bytes(L, H, n - new, new), gpu=work.gpu, device=work.device)


def is_long(model: LoadedModel, n: int, layers: int | None = None) -> bool:
    """Whether `mha_viz.analyze` of n tokens (every layer, or `layers` of them) makes a long run: every layer of a
    decoder or an encoder, past MHA_VIZ_DENSE_MB (`head_rows.held_densely`)."""
    if layers is not None or model.is_encoder_decoder:
        return False
    if model.effective and not effective_run.by_rows(model):  # Mamba-1, RWKV: each layer's matrices whole
        return False
    return not head_rows.held_densely(model.num_layers, model.num_heads, n)


def summaries_bytes(model: LoadedModel, n: int, *, top_k: int = TOP_K, thumb: int = THUMB) -> int:
    """What a scan (a long run) of n tokens keeps of every head: each row's top_k keys and weights, its rest, and a
    thumbnail."""
    return 4 * model.num_layers * model.num_heads * (n * (2 * top_k + 1) + thumb * thumb)


def kept_bytes(model: LoadedModel, n: int) -> int:
    """What the run of an analysis of n tokens keeps once made: a long run's summaries, else every head's
    probabilities, outputs and value norms (`memory.run_bytes`)."""
    return summaries_bytes(model, n) if is_long(model, n) else memory.run_bytes(model, n)


def analysis(model: LoadedModel, n: int, *, layers: int | None = None) -> Need:
    """What `mha_viz.analyze` of n tokens (every layer, or `layers` of them) holds at its peak: the long run it makes
    of every layer of a decoder or an encoder past MHA_VIZ_DENSE_MB (`head_rows.held_densely`), the scan's need;
    else the dense capture's (`memory.analysis_need`)."""
    if is_long(model, n, layers):
        return scan(model, n)
    need = memory.analysis_need(model, n, layers=layers)
    if model.effective:  # Mamba, Mamba-2: one layer's effective attention made at a time beside the run
        work = on_device(model, effective_run.layer_bytes(model, n))
        return Need(host=need.host + work.host, gpu=need.gpu + work.gpu, device=need.device or work.device,
                    attention=need.attention)
    return need


def scan(model: LoadedModel, n: int, *, top_k: int = TOP_K, thumb: int = THUMB) -> Need:
    """The whole-text overview (`mha_viz.scan`) of n tokens: what it keeps of every head (each row's top_k
    keys and weights, the rest, a thumbnail) and, while it runs, one forward with fused attention (the
    layers' inputs go to a file), one block of rows (`scan.rows`), one layer's probabilities for a
    family read through its own attention, and a decoder's own loss and last logits made later from its last
    hidden states, a block of logits at a time (`own_outputs.read_bytes`). A model of effective layers alone
    (Mamba-2, xLSTM) holds its layers' taps and a block of rows for each reducing thread instead."""
    H = model.num_heads
    kept = summaries_bytes(model, n, top_k=top_k, thumb=thumb)
    if model.effective:  # Mamba-2, xLSTM: every layer's taps, a block of rows a reducer and one being made, no logits
        blocks = (thread_count() + 1) * effective_run.block_bytes(model, n)
        return on_device(model, effective_run.taps_bytes(model, n) + blocks + 4 * 12 * n * model.d_model, kept=kept)
    block = 4 * H * n * scan_rows.rows_per_block(model.device, H, n)
    own = 0 if model.can_recompute else 2 * model.attention_bytes(n, layers=1)
    work = block + own + 4 * 12 * n * model.d_model + own_outputs.read_bytes(memory.logits_width(model), n)
    return on_device(model, work, kept=kept)
