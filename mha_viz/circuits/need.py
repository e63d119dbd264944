"""What the jobs of *Heads behind a prediction*, *Circuit behind a prediction*, *Heads behind a task* and *Head
composition* declare to the admission (`admission.Admission.hold`): the estimate, real patching, a circuit found, a
circuit or edge run for real, and the weights-only scores (`plan_composition`, `plan_copying`), each one `needs.Need`
from the estimates of the modules that compute it (`ablation.gradient_bytes`, the circuits' `edges.receiver_bytes`,
the folded weights of `composition`)."""

from __future__ import annotations

from typing import Callable, TypeVar

import torch

from mha_viz.budget import capture_budget
from mha_viz.budget.plan import Plan, forward_bytes, on_device
from mha_viz.circuits import composition as compose
from mha_viz.circuits import edges, path_patching
from mha_viz.interventions import ablation, prediction
from mha_viz.needs import Need, analysis, kept_bytes, larger
from mha_viz.text.tokenize import tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.reading import readout


def estimate(model: LoadedModel, n: int) -> Need:
    """*Heads behind a prediction*'s estimate (`prediction.explain`) of two texts of n tokens: its backward
    pass (the last position's logits only where the model makes those alone), then both texts'
    analyses, the first one's run kept while the second runs. A backward pass that would not fit
    (`ablation.check_gradient_budget`) is not run (the explanation says so, and real patching is still
    offered): then the analyses alone."""
    rows = 1 if readout.keeps_last_logits(model.hf_model) else None
    one = analysis(model, n)  # a long run's where analyze makes one
    kept = kept_bytes(model, n)  # what the first run keeps while the second runs
    both = Need(host=one.host + kept, gpu=one.gpu, device=one.device, attention=2 * one.attention)
    try:
        ablation.check_gradient_budget(model, n, logit_rows=rows)
    except ablation.GradientBudget:
        return both
    return larger(on_device(model, ablation.gradient_bytes(model, n, logit_rows=rows)), both)


def pair_job(model: LoadedModel, clean: str, max_tokens: int | None, *, batch: bool) -> tuple[int, Need]:
    """A pair's job (*Heads behind a prediction*'s, or a task's over its longest clean prompt `clean`, cut to
    max_tokens), checked once: (its tokens, its need: real patching, `batch`, or the estimate); InputError, naming
    the longest text that fits, when it would pass the capture budget (`prediction.check_budget`)."""
    n = tokenize(model, clean, max_tokens).n
    prediction.check_budget(model, clean, max_tokens, batch=batch)
    return n, (patching(model, n) if batch else estimate(model, n))


def patching(model: LoadedModel, n: int) -> Need:
    """Real patching of every head (`attribution.patch_heads`) or of one head at each position
    (`patch_positions`): one batched forward of a sequence a head, over texts of n tokens."""
    return on_device(model, forward_bytes(model, n, rows=model.num_heads))


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


T = TypeVar("T")


def plan_patched(model: LoadedModel, n: int, work: Callable[..., T]) -> Plan[T]:
    """`work`, patching on the texts of n tokens a page's plan read already (one head at each position, a head's
    promoted tokens): priced as `patching`, nothing read again."""
    return Plan(n, patching(model, n), work)


def plan_path_patched(model: LoadedModel, n: int, work: Callable[..., T]) -> Plan[T]:
    """`work`, circuits or edges run for real on the texts of n tokens a page's plan read already (a circuit's
    curve, a task's faithfulness): priced as `path_patched`, nothing read again."""
    return Plan(n, path_patched(model, n), work)


def _weights_bytes(model: LoadedModel) -> int:
    """Every layer's folded weights in float64 (`folded.folded_weights`: W_Q and W_O a query head, W_K and W_V a
    K/V head), and their float32 factors beside them (about half as much again)."""
    return int(1.5 * 8 * model.num_layers * 2 * (model.num_heads + model.num_kv_heads) * model.d_model * model.d_k)


def plan_composition(model: LoadedModel, *, device: str | torch.device | None = None) -> Plan:
    """`composition.composition_scores` (on `device`) with their random baseline (`composition_baseline`), planned:
    its need is the folded weights and the scores kept (float64 while they are made, then float32) on the host, and
    one block of the pairwise product with its pieces where it is multiplied; nothing admitted where the scores are
    kept already (`composition_known`). Read off the weights: no tokens (n = 0)."""
    pairs = 3 * (model.num_layers * model.num_heads) ** 2 * (8 + 4)
    need = on_device(model, 3 * 4 * compose.BLOCK, kept=_weights_bytes(model) + pairs)
    return Plan(0, need, lambda: (compose.composition_scores(model, device=device),
                                  compose.composition_baseline(model)), admit=not compose.composition_known(model))


def plan_copying(model: LoadedModel) -> Plan:
    """`composition.copying_scores`, planned: W_U and W_E in float64 with their product, and the folded weights, on
    the host; nothing admitted where the scores (or their refusal) are kept already (`copying_known`)."""
    vocab = getattr(model.hf_model.config, "vocab_size", 0) or 0
    need = Need(host=2 * 8 * model.d_model * vocab + _weights_bytes(model))
    return Plan(0, need, lambda: compose.copying_scores(model), admit=not compose.copying_known(model))
