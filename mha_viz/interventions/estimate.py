"""Attribution patching (Nanda 2023; Syed et al. 2023): the first-order estimate of what patching
each head's output z would do, for every head at every position, from one forward pass on each
text and one backward pass (`docs/attribution.md`, section 4):

    Δm ≈ ⟨∂m/∂z_h(run), z_h(source) − z_h(run)⟩

where `run` is the text being patched (the corrupted one when denoising, the clean one when
noising), `source` the other, and the gradient of m = logit(answer) − logit(wrong) at the last
position is taken on `run` at the input of each layer's W_O. Summed over positions it estimates
`patching.patch_heads`; per position, `patching.patch_positions` for every head at once. It is
exact when nothing between z and the logits bends (`tests/models/test_estimate.py`) and fails
where attention saturates or where effects cancel (AtP*, Kramár et al. 2024): real patching
settles it. `agreement` compares the two."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from mha_viz.interventions.ablation import check_gradient_budget
from mha_viz.interventions.patching import Patching, check_mode, ends, logit_difference, texts
from mha_viz_models import LoadedModel
from mha_viz_models.loading import switch
from mha_viz_models.reading import readout
from mha_viz_models.reading.masking import head_mask

DISAGREE = 0.1  # |estimate − real| beyond this share of the gap marks a head where the two disagree
ABOUT = ("The estimate is attribution patching: one backward pass gives each head's first-order effect, "
         "⟨∂m/∂z, z(clean) − z(corrupted)⟩, as a share of the gap. It is fast and usually close, but it is a "
         "straight-line guess: it fails where attention saturates (a head that looks at one token with "
         "probability ≈ 1) and where effects cancel. Patching the heads for real settles it.")


def _forward(model: LoadedModel, ids: torch.Tensor, scale: torch.Tensor, record: list) -> torch.Tensor:
    """Logits (1, k, vocab) of one forward of ids (1, n) with every head's z recorded through the
    head mask `scale` (`mha_viz_models.reading.masking`); k = 1 where the model computes the last position's only."""
    kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    if readout.keeps_last_logits(model.hf_model):
        kwargs["logits_to_keep"] = 1  # m reads the last position: no (n, vocab) product, forward or back
    with head_mask(model, scale, None, record), switch.fused(model):
        return model.hf_model(**kwargs).logits


def check_budget(model: LoadedModel, n: int) -> None:
    """InputError (`ablation.GradientBudget`) when the estimate's backward pass over texts of n tokens would not fit
    the memory budget (`ablation.check_gradient_budget`): what `estimate_positions` checks before it runs, and a page
    before its button."""
    check_gradient_budget(model, n, doing=f"Estimating every head of {model.name} with one backward pass",
                          logit_rows=1 if readout.keeps_last_logits(model.hf_model) else None, fused=True)


def estimate_positions(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None,
                       mode: str = "denoise", *, max_tokens: int | None = None) -> Patching:
    """The first-order estimate of patching each head at each position: `.values` (layers, heads,
    n), the estimated restored fraction (denoise) or damage (noise) of patching head h's z at
    position i only; its sum over positions estimates patching the head everywhere. One forward
    on each text, one backward pass; gradients are kept for the heads' outputs only (parameters
    hold none). The defaults and refusals of `patching.patch_heads`, and InputError when the
    backward pass would not fit the memory budget (`ablation.check_gradient_budget`)."""
    check_mode(mode)
    t = texts(model, clean, corrupted, answer, wrong, None, max_tokens, what="attribution patching")
    check_budget(model, t.n)
    run_ids, source_ids = (t.ids_x, t.ids_c) if mode == "denoise" else (t.ids_c, t.ids_x)
    L, H = model.num_layers, model.num_heads
    with model.lock:
        source: list = []
        with torch.inference_mode():
            source_logits = _forward(model, source_ids, torch.ones(L, H, device=model.device), source)
        record: list = []
        with torch.inference_mode(False), torch.enable_grad():  # also when called inside inference mode
            scale = torch.ones(L, H, device=model.device, requires_grad=True)  # the graph starts at each z
            logits = _forward(model, run_ids, scale, record)
            e = ends(model, t, *((source_logits, logits.detach()) if mode == "denoise"
                                 else (logits.detach(), source_logits)))
            m = logit_difference(logits.float(), e.a, e.b)[0]
            grads = torch.autograd.grad(m, [out for _, out in record])
    if not len(record) == len(source) == L:
        raise RuntimeError(f"{model.name}: the heads' outputs were recorded {len(record)} and {len(source)} times, "
                           f"not once for each of its {L} attention layers")
    delta = torch.stack([(g[0].float() * (zs[0].float() - z.detach()[0].float())).sum(-1).T.cpu()  # (H, n) from
                         for (z, _), (zs, _), g in zip(record, source, grads)])  # each layer's device: (L, H, n), Δm
    m_run = e.m_corr if mode == "denoise" else e.m_clean  # the patched run's metric, moved by Δm
    return e.result(mode, e.moved(m_run + delta.double(), mode).numpy().astype(np.float32), None, estimated=True)


def by_head(positions: Patching) -> Patching:
    """The per-head estimate (layers, heads) of a per-position one: its sum over positions."""
    if positions.values.ndim != 3:
        raise ValueError("by_head takes estimate_positions' (layers, heads, n) result")
    return Patching(positions.mode, positions.values.sum(-1), positions.m_clean, positions.m_corrupted,
                    positions.answer, positions.wrong, None, True)


def estimate_heads(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None, mode: str = "denoise", *,
                   max_tokens: int | None = None) -> Patching:
    """The first-order estimate of `patching.patch_heads` (every position of each head patched):
    `.values` (layers, heads), from the same passes as `estimate_positions`, of which it is the
    sum over positions. The same defaults and refusals as `patch_heads`."""
    return by_head(estimate_positions(model, clean, corrupted, answer, wrong, mode, max_tokens=max_tokens))


@dataclass
class Agreement:
    """How the estimate compares with real patching, head by head."""

    pearson: float  # NaN when either is constant
    spearman: float
    differ: np.ndarray  # (layers, heads) bool: |estimate − real| > DISAGREE
    largest: float  # the largest |estimate − real|
    where: tuple[int, int]  # its (layer, head)


def agreement(estimated: np.ndarray, real: np.ndarray, threshold: float = DISAGREE) -> Agreement:
    """Pearson and Spearman correlations of the estimate against real patching over the heads,
    the heads where the two differ by more than `threshold` of the gap, and the largest difference."""
    e, r = np.asarray(estimated, dtype=np.float64), np.asarray(real, dtype=np.float64)
    if e.shape != r.shape:
        raise ValueError(f"the estimate {e.shape} and real patching {r.shape} must have one shape")
    gap = np.abs(e - r)
    flat_e, flat_r = e.ravel(), r.ravel()
    constant = flat_e.size < 2 or np.ptp(flat_e) == 0 or np.ptp(flat_r) == 0
    pearson = float("nan") if constant else float(stats.pearsonr(flat_e, flat_r).statistic)
    spearman = float("nan") if constant else float(stats.spearmanr(flat_e, flat_r).statistic)
    at = np.unravel_index(int(np.argmax(gap)), gap.shape)
    return Agreement(pearson, spearman, gap > threshold, float(gap[at]), (int(at[0]), int(at[1])))
