"""Activation patching of every head over a task (`PromptSet`): per pair the same restored fraction (or damage)
as `interventions.patching.patch_heads` gives for that pair alone, then the mean over the pairs with its
bootstrap interval and a sign-flip p-value per head (`tasks.uncertainty`).

Batching: pairs of the same length run together. For each layer one forward holds `pairs × heads` sequences
(sequence p·H + h: pair p with head h's output z from the other run), so a set of P pairs costs about
P / batch × L forwards instead of P × L. `batch` pairs at a time (default: as many as keep one forward within
`TOKENS_PER_FORWARD` tokens)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from mha_viz.interventions import patching
from mha_viz.interventions.patching import check_mode, require_decoder
from mha_viz.progress import report
from mha_viz.tasks.prompt_set import Checked, PromptSet, check, is_task
from mha_viz.tasks.uncertainty import MeanOverPairs, mean_over_pairs
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.loading.outputs_run import head_outputs_run

TOKENS_PER_FORWARD = 16_384  # pairs × heads × n of one patched forward, by default
METRICS = ("normalised", "raw")
NO_GAP = "no gap between the clean and the corrupted logit difference"  # why a task leaves such a pair out


@dataclass
class TaskPatching(MeanOverPairs):
    """Patching over a task. per_pair (pairs, layers, heads): each kept pair's restored fraction (denoise) or
    damage (noise), or with metric="raw" the logit difference moved, unnormalised; mean, low, high (layers,
    heads): the mean over the pairs and its bootstrap interval; p_value: the sign-flip p-value of mean ≠ 0."""
    mode: str
    metric: str
    m_clean: np.ndarray  # (pairs,)
    m_corrupted: np.ndarray


def _patched(model: LoadedModel, run_ids: torch.Tensor, layer: int, source: torch.Tensor, a: torch.Tensor,
             b: torch.Tensor, position: int | None) -> torch.Tensor:
    """m of every (pair, head) of one layer: run_ids (P, n) each repeated H times, copy p·H + h with head h's z
    at layer `layer` from source[p, h] (P, H, n, d_v); (P, H)."""
    P, H = run_ids.shape[0], model.num_heads
    where = slice(None) if position is None else slice(position, position + 1)
    rows = torch.arange(P * H)
    heads = rows % H

    def swap(z: torch.Tensor) -> None:
        z[rows, where, heads] = source[rows // H, heads, where, :z.shape[-1]].to(z.dtype)  # (P · H, positions, d_v)
    logits = patching.swapped_forward(model, run_ids, layer, swap, copies=H, last=True)
    return _ends(logits, rows, a.repeat_interleave(H), b.repeat_interleave(H)).reshape(P, H)


def _ends(logits: torch.Tensor, rows: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """m = logit(a_p) − logit(b_p) at the last position of each pair p of a batch."""
    last = logits[:, -1].float()
    return last[rows, a] - last[rows, b]


def length_groups(checked: Checked, batch: int) -> list[list[int]]:
    """Positions in `checked` of pairs of one length, `batch` at a time."""
    by_length = defaultdict(list)
    for i, ids in enumerate(checked.clean_ids):
        by_length[len(ids)].append(i)
    return [same[k:k + batch] for same in by_length.values() for k in range(0, len(same), batch)]


def patch_set(model: LoadedModel, prompts: PromptSet, mode: str = "denoise", position: int | None = None, *,
              metric: str = "normalised", batch: int | None = None, resamples: int = 1000, level: float = 0.95,
              seed: int = 0, max_tokens: int | None = None, progress=None) -> TaskPatching:
    """Every head patched on every pair of `prompts` (see the module). Pairs a model cannot run (answer or wrong
    not one token, texts of different lengths, no gap between the two ends) are left out and counted; InputError
    when none is left. progress(fraction, message): after each layer of each batch (a callback that raises stops it)."""
    check_mode(mode)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    require_decoder(model, "patching")
    checked = check(model, prompts, max_tokens)
    L, H = model.num_layers, model.num_heads
    longest = max(len(ids) for ids in checked.clean_ids)
    batch = batch or max(1, TOKENS_PER_FORWARD // (H * longest))
    groups = length_groups(checked, batch)
    values = np.zeros((len(checked.kept), L, H), np.float64)
    ends = np.zeros((len(checked.kept), 2), np.float64)
    done, total = 0, len(groups) * L
    for g, group in enumerate(groups):
        ids_c = torch.tensor([checked.clean_ids[i] for i in group], device=model.device)
        ids_x = torch.tensor([checked.corrupted_ids[i] for i in group], device=model.device)
        n = ids_c.shape[1]
        if position is not None and not -n <= position < n:
            raise InputError(f"Position {position} is outside the texts' {n} tokens.")
        a = torch.tensor([checked.answers[i] for i in group], device=model.device)
        b = torch.tensor([checked.wrongs[i] for i in group], device=model.device)
        cap_c, cap_x = head_outputs_run(model, ids_c), head_outputs_run(model, ids_x)  # z and logits, fused
        rows = torch.arange(len(group), device=model.device)
        m_clean, m_corr = (_ends(cap.output.logits, rows, a, b) for cap in (cap_c, cap_x))
        ends[group] = torch.stack([m_clean, m_corr], 1).cpu().numpy()
        base, run_ids = (cap_c, ids_x) if mode == "denoise" else (cap_x, ids_c)
        pos = None if position is None else position % n
        for layer in range(L):
            m = _patched(model, run_ids, layer, base.head_outputs[layer], a, b, pos).double()  # (P, H)
            mc, mx = m_clean.double()[:, None], m_corr.double()[:, None]
            moved = (m - mx) if mode == "denoise" else (mc - m)
            values[group, layer] = (moved / (mc - mx) if metric == "normalised" else moved).cpu().numpy()
            done += 1
            report(progress, done / total, f"Layer {layer + 1} of {L} patched" + (
                f", batch {g + 1} of {len(groups)} of pairs of one length" if len(groups) > 1 else ""))
    return over_the_pairs(values, ends, checked, prompts, mode, metric, resamples=resamples, level=level, seed=seed)


def over_the_pairs(values: np.ndarray, ends: np.ndarray, checked: Checked, prompts: PromptSet, mode: str,
                   metric: str, *, resamples: int, level: float, seed: int) -> TaskPatching:
    """A `TaskPatching` of each kept pair's values (pairs, layers, heads) and ends (pairs, 2: m on the clean and
    on the corrupted prompt): the pairs with no gap between their ends left out and counted (they restore
    nothing), then the mean, its bootstrap interval and the sign-flip p-value."""
    gap = np.abs(ends[:, 0] - ends[:, 1]) >= 1e-6
    left_out = dict(checked.left_out)
    if not gap.all():
        left_out[NO_GAP] = int((~gap).sum())
    if not gap.any():
        raise InputError(f"No pair of {prompts.source!r} moves the logit difference between its two prompts.")
    values, ends = values[gap], ends[gap]
    return TaskPatching(mode, metric, ends[:, 0].astype(np.float32), ends[:, 1].astype(np.float32),
                        **mean_over_pairs(values, resamples=resamples, level=level, seed=seed),
                        kept=[k for k, g in zip(checked.kept, gap) if g], left_out=left_out, source=prompts.source,
                        level=level, resamples=resamples, seed=seed)


def patch_heads(model: LoadedModel, clean, corrupted: str | None = None, answer=None, wrong=None,
                mode: str = "denoise", position: int | None = None, *, max_tokens: int | None = None, progress=None,
                **over_a_set):
    """Activation patching of every head: of one prompt pair (`interventions.patching.patch_heads`: a
    `Patching`), or, when `clean` is a `PromptSet`, of a task (`patch_set`: a `TaskPatching` with each pair's
    values, their mean, its bootstrap interval and a p-value; `over_a_set`: metric, batch, resamples, level,
    seed)."""
    if is_task(clean, corrupted, over_a_set, "patch_heads"):
        return patch_set(model, clean, mode, position, max_tokens=max_tokens, progress=progress, **over_a_set)
    return patching.patch_heads(model, clean, corrupted, answer, wrong, mode, position, max_tokens=max_tokens,
                                progress=progress)
