"""What each heavy computation besides an analysis declares to the admission (`admission.Admission.hold`):
one `memory.Need` a path, from the estimates its own module writes (`memory.analysis_need`,
`ablation.gradient_bytes`, the circuits' `edges.receiver_bytes`, the corpus's `batching.capture_bytes`,
the scan's blocks), so that two of them are never admitted together onto memory that holds one.

Working memory is where the model runs (`on_device`: the GPU's for a model on CUDA, else the host's);
what a result keeps is the host's. Ray's actors, which load a model of their own in other processes,
are not counted in a corpus job's need.
"""

from __future__ import annotations

import numpy as np

from mha_viz.budget import capture_budget, memory
from mha_viz.capture import head_rows
from mha_viz.capture.grown_rows import recorded_bytes
from mha_viz.circuits import edges, path_patching
from mha_viz.corpus.batching import capture_bytes
from mha_viz.interventions import ablation
from mha_viz.scan import rows as scan_rows
from mha_viz.text.tokenize import tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.reading import readout

Need = memory.Need


def tokens(model: LoadedModel, text: str, max_tokens: int | None = None, *, whole_text: bool = False) -> int:
    """How many tokens of `text` a computation cut to max_tokens runs on (`tokenize`), for its need."""
    return tokenize(model, text, max_tokens, whole_text=whole_text).n


def on_device(model: LoadedModel, working: int, *, kept: int = 0) -> Need:
    """`working` bytes where `model` runs and `kept` bytes of results in the host's memory."""
    place = memory.cuda_place(model.device)
    if place:
        return Need(host=int(kept), gpu=int(working), device=place)
    return Need(host=int(kept + working))


def larger(*needs: Need) -> Need:
    """The need of computations that run one after another: the largest of each at every place."""
    device = next((n.device for n in needs if n.device), "")
    return Need(host=max(n.host for n in needs), gpu=max(n.gpu for n in needs), device=device,
                attention=max(n.attention for n in needs))


def forward_bytes(model: LoadedModel, n: int, rows: int = 1) -> int:
    """A plain forward of `rows` sequences of n tokens (no attention kept): per sequence one layer's
    scores on their way to the softmax (3 H n²), about 12 activations of width d_model a token (the
    residual stream, q, k, v, the MLP's wider hidden layer) and the logits (n × `memory.logits_width`)."""
    H, d = model.num_heads, model.d_model
    return 4 * rows * (3 * H * n * n + 12 * n * d + n * memory.logits_width(model))


def gradient(model: LoadedModel, n: int, rows: int = 1) -> Need:
    """Gradient importance (`ablation.head_importance`) of a text of n tokens: `rows` passes side by side."""
    return on_device(model, rows * ablation.gradient_bytes(model, n))


def estimate(model: LoadedModel, n: int) -> Need:
    """*Heads behind a prediction*'s estimate (`prediction.explain`) of two texts of n tokens: its backward
    pass (the last position's logits only where the model makes those alone), then both texts'
    analyses, the first one's run kept while the second runs. A backward pass that would not fit
    (`ablation.check_gradient_budget`) is not run (the explanation says so, and real patching is still
    offered): then the analyses alone."""
    rows = 1 if readout.keeps_last_logits(model.hf_model) else None
    one = memory.analysis_need(model, n)
    kept = memory.run_bytes(model, n)
    both = Need(host=one.host + kept, gpu=one.gpu, device=one.device, attention=2 * one.attention)
    try:
        ablation.check_gradient_budget(model, n, logit_rows=rows)
    except ablation.GradientBudget:
        return both
    return larger(on_device(model, ablation.gradient_bytes(model, n, logit_rows=rows)), both)


def prediction(model: LoadedModel, clean: str, max_tokens: int | None, *, batch: bool) -> Need:
    """*Heads behind a prediction*'s job on the clean text `clean` (cut to max_tokens): real patching
    (`batch`) or the estimate."""
    n = tokenize(model, clean, max_tokens).n
    return patching(model, n) if batch else estimate(model, n)


def forward(model: LoadedModel, n: int, rows: int = 1) -> Need:
    """Forward passes of `rows` sequences of n tokens side by side, keeping nothing (`forward_bytes`)."""
    return on_device(model, forward_bytes(model, n, rows))


def pruning(model: LoadedModel, docs: int, n: int) -> Need:
    """A pruning curve over `docs` documents of at most n tokens: forward passes of as many documents side
    by side as the capture budget allows (one at least)."""
    one = forward_bytes(model, n)
    return on_device(model, min(docs * one, max(one, capture_budget.capture_budget())))


def patching(model: LoadedModel, n: int) -> Need:
    """Real patching of every head (`attribution.patch_heads`) or of one head at each position
    (`patch_positions`): one batched forward of a sequence a head, over texts of n tokens."""
    return on_device(model, forward_bytes(model, n, rows=model.num_heads))


def generation(model: LoadedModel, n: int, new: int = 0) -> Need:
    """A generation whose prompt and `new` tokens come to n: every head's attention recorded into one
    (L, H, n, n) array, with the prompt's forward and the KV cache: about what an analysis of n tokens holds.
    A long one (past MHA_VIZ_DENSE_MB, `capture.generation`): the prompt's fused forward, then one scan of n
    tokens (the larger), beside the new tokens' rows it keeps (`grown_rows.recorded_bytes`)."""
    L, H = model.num_layers, model.num_heads
    if head_rows.held_densely(L, H, n):
        return memory.analysis_need(model, n)
    work = larger(forward(model, n), scan(model, n))
    return Need(host=work.host + recorded_bytes(L, H, n - new, new), gpu=work.gpu, device=work.device)


def corpus(model: LoadedModel, batch: int, n: int, *, importance: bool) -> Need:
    """A corpus job (`corpus.head_statistics`) of batches of `batch` documents of at most n tokens: a
    batch's capture (`batching.capture_bytes`; batches shrink to the capture budget) and, with
    `importance`, its gradient passes (as many side by side as the capture budget allows, one at least)."""
    work = min(capture_bytes(model, batch, n), max(capture_bytes(model, 1, n), capture_budget.capture_budget()))
    if importance:
        one = ablation.gradient_bytes(model, n)
        work = max(work, min(batch * one, max(one, capture_budget.capture_budget())))
    return on_device(model, work)


def scan(model: LoadedModel, n: int, *, top_k: int = 8, thumb: int = 48) -> Need:
    """The whole-text overview (`mha_viz.scan`) of n tokens: what it keeps of every head (each row's top_k
    keys and weights, the rest, a thumbnail) and, while it runs, one forward with fused attention (the
    layers' inputs go to a file), one block of rows (`scan.rows`), and one layer's probabilities for a
    family read through its own attention."""
    L, H = model.num_layers, model.num_heads
    kept = 4 * L * H * (n * (2 * top_k + 1) + thumb * thumb)
    block = 4 * H * n * scan_rows.rows_per_block(model.device, H, n)
    own = 0 if model.can_recompute else 2 * model.attention_bytes(n, layers=1)
    work = block + own + 4 * (12 * n * model.d_model + n * memory.logits_width(model))
    return on_device(model, work, kept=kept)


def circuit(model: LoadedModel, n: int, *, method: str = "eap", steps: int = 5) -> Need:
    """Finding a circuit (`edges.edge_attribution`, then `path_patching.faithfulness_curve`) on texts of
    n tokens: the gradient passes side by side (`edges.fitting_rows` for EAP-IG) with every receiver's own
    input (`edges.receiver_bytes`), or the batches of patched runs (`path_patching.BATCH_BYTES`) beside both
    texts' recorded writes; the larger. InputError for a family whose heads' writes cannot be split."""
    g = edges.graph(model)
    logit_rows = 1 if readout.keeps_last_logits(model.hf_model) else None
    rows = 1 if method == "eap" else edges.fitting_rows(model, g, n, steps)
    attributed = (rows * ablation.gradient_bytes(model, n, logit_rows=logit_rows)
                  + edges.receiver_bytes(model, g, n, rows))
    patched = min(path_patching.BATCH_BYTES, capture_budget.capture_budget()) + edges.receiver_bytes(model, g, n)
    return on_device(model, max(attributed, patched))


def path_patched(model: LoadedModel, n: int) -> Need:
    """One circuit or edge run for real (`path_patching`) on texts of n tokens: batches of patched runs
    beside both texts' recorded writes, within the check of one gradient-free pass."""
    g = edges.graph(model)
    return on_device(model, min(path_patching.BATCH_BYTES, capture_budget.capture_budget())
                     + edges.receiver_bytes(model, g, n) + forward_bytes(model, n, rows=2))


COMPARE_BLOCK_BYTES = 4 * 8 * 2**22  # float64 temporaries of one block of rows (views.comparison.CHUNK_ENTRIES)


def comparison(run_a, run_b) -> Need:
    """`mha_viz.compare` of two runs already made, from their sizes: on the same tokens, each layer's rows
    of both a block at a time; otherwise every head of a layer of each run at word level (H · words²
    float64 each) and, for runs that hold special tokens (hidden when the tokenizers place them
    differently), a copy of each without them (every head's array, `head_rows.every_head_bytes`)."""
    if run_a.n == run_b.n and run_a.model_name == run_b.model_name:
        return Need(host=COMPARE_BLOCK_BYTES)
    words = sum(8 * run.num_heads * (int(np.count_nonzero(np.diff(run.word_ids))) + 1) ** 2 for run in (run_a, run_b))
    copies = sum(head_rows.every_head_bytes(run.num_layers, run.num_heads, run.n) for run in (run_a, run_b)
                 if any(run.special_mask))
    return Need(host=int(COMPARE_BLOCK_BYTES + words + copies))


def export(run, *, float16: bool = False) -> Need:
    """The run's `.npz` download (`run_file.to_bytes`): the arrays (a float16 copy of the attention when
    asked), their compressed file and its copy handed out (each at most as large as the arrays)."""
    size = sum(int(a.nbytes) for a in (run.head_outputs, run.value_norms) if a is not None)
    size += run.attentions.nbytes // 2 if float16 else run.attentions.nbytes
    return Need(host=3 * size)


def report(run, heads: int) -> Need:
    """The HTML report (`report.report_bytes`) of `heads` heads: the head table's work on one layer's
    probabilities at a time (about 4 copies of it), and each chosen head's heatmap as numbers and as text
    (about 16 bytes a weight)."""
    layer = run.attentions.nbytes // max(run.num_layers, 1)
    return Need(host=int(4 * layer + 16 * heads * run.n * run.n))
