"""Edge attribution over a task (`PromptSet`): every edge's score on every pair, the same as
`circuits.edges.edge_attribution` gives for that pair alone, then each edge's mean over the pairs with its
bootstrap interval (`tasks.uncertainty`).

Both methods batch the pairs of one length, as many as the memory budget lets run side by side
(`circuits.edges.check_budget`, rows = pairs). EAP: one forward on the corrupted prompts, one forward and one
backward on the clean ones. EAP-IG: both prompts recorded in one forward, then `steps` forwards and backwards of the
whole batch, each at one point α of every pair's path from its corrupted prompt's embeddings to its clean one's (its
gradients and their running sum held for every pair: half as many pairs a batch).
metric="normalised" divides each pair's scores by its gap m_clean − m_corrupted (a score then reads as the share
of the task's logit difference the edge carries); "raw" keeps logit units."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mha_viz.capture import finite
from mha_viz.circuits import edges
from mha_viz.interventions.patching import require_decoder
from mha_viz.progress import report
from mha_viz.tasks.patching_set import METRICS, length_groups
from mha_viz.tasks.prompt_set import PromptSet, check, is_task
from mha_viz.tasks.uncertainty import OverPairs, bootstrap_interval
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.reading import split_run


@dataclass
class TaskEdges(OverPairs):
    """Edge attribution over a task. table: sender, receiver, input, and each edge's mean score over the pairs
    with its interval (low, high); per_pair (pairs, edges): each kept pair's scores in the table's row order."""
    table: pd.DataFrame
    per_pair: np.ndarray
    method: str
    steps: int
    metric: str
    m_clean: np.ndarray
    m_corrupted: np.ndarray

    def top(self, k: int) -> pd.DataFrame:
        """The k edges of largest |mean|, largest first."""
        return self.table.reindex(self.table["mean"].abs().sort_values(ascending=False).index).head(k)


def _fitting_pairs(model: LoadedModel, g, n: int, most: int, method: str = "eap") -> int:
    """How many pairs of n tokens fit one batch of `method` in the memory budget (`edges.fitting_rows`, rows =
    pairs; EAP-IG holds two rows a pair: a run's gradients and their sum); GradientBudget when one does not."""
    rows = 1 if method == "eap" else 2
    edges.check_budget(model, g, n, rows, edges.attributing(model, method))
    return edges.fitting_rows(model, g, n, rows * most) // rows


def _eap_batch(model: LoadedModel, g, ids_c, ids_x, a, b) -> tuple[np.ndarray, np.ndarray]:
    """(scores (B, S, R), ends (B, 2): m on the clean and on the corrupted prompt) of a batch of pairs."""
    rows = torch.arange(ids_c.shape[0], device=ids_c.device)

    def metric(logits, logits_x):
        last, last_x = logits[:, -1].float(), logits_x[:, -1].float()
        m = last[rows, a] - last[rows, b]
        return m, torch.stack([m.detach(), last_x[rows, a] - last_x[rows, b]], 1)
    clean, corrupted, grads, ends = edges.gradients(model, g, ids_c, ids_x, metric)
    delta = (corrupted.float() - clean.float()).to(grads.device)  # (B, S, n, d)
    scores = torch.einsum("bsnd,brnd->bsr", delta, grads).cpu().numpy().astype(np.float64)
    return scores, ends.cpu().numpy().astype(np.float64)


def _ig_batch(model: LoadedModel, g, ids_c, ids_x, a, b, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores (B, S, R), ends (B, 2)) of a batch of pairs by EAP-IG, as `edges.edge_attribution` computes one pair:
    every clean and corrupted prompt recorded side by side, then for each α = 1/steps … 1 one forward of the batch
    whose input embeddings are each pair's corrupted ones moved α of the way to its clean ones, and one backward
    through every receiver; the gradients' mean over the αs times each sender's write's change."""
    B = ids_c.shape[0]
    rows = torch.arange(B, device=ids_c.device)
    embed = model.hf_model.get_input_embeddings()
    with model.lock, torch.inference_mode():
        rec = split_run.Recorder()
        logits = split_run.run(model, g, rec, input_ids=torch.cat([ids_c, ids_x]))
        clean, corrupt = embed(ids_c).float(), embed(ids_x).float()
    writes = rec.writes()  # (2B, S, n, d): the clean prompts', then the corrupted ones'
    last = logits[:, -1].float()
    ends = torch.stack([last[:B][rows, a] - last[:B][rows, b], last[B:][rows, a] - last[B:][rows, b]], 1)
    total = None
    for k in range(1, steps + 1):
        alpha = torch.tensor(k, dtype=torch.float32) / steps
        points = (corrupt + alpha * (clean - corrupt)).to(model.dtype)  # (B, n, d)
        part = edges.interpolated_gradients(model, g, ids_c, points, a, b)  # (B, R, n, d)
        total = part if total is None else total + part
    delta = (writes[B:].float() - writes[:B].float()).to(total.device)  # (B, S, n, d)
    scores = torch.einsum("bsnd,brnd->bsr", delta, total / steps).cpu().numpy().astype(np.float64)
    return scores, ends.cpu().numpy().astype(np.float64)


def edge_attribution_set(model: LoadedModel, prompts: PromptSet, *, method: str = "eap", steps: int = 5,
                         metric: str = "normalised", batch: int | None = None, resamples: int = 1000,
                         level: float = 0.95, seed: int = 0, max_tokens: int | None = None,
                         progress=None) -> TaskEdges:
    """Every edge attributed on every pair of `prompts` (see the module). Pairs a model cannot run are left out
    and counted; InputError when none is left. progress(fraction, message) between batches."""
    if method not in edges.METHODS:
        raise ValueError(f"method must be 'eap' or 'eap-ig', not {method!r}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    if int(steps) < 1:
        raise ValueError("steps must be at least 1")
    require_decoder(model, "edge attribution")
    checked = check(model, prompts, max_tokens)
    g = edges.graph(model)
    allowed = g.allowed
    per_pair = np.zeros((len(checked.kept), int(allowed.sum())), np.float64)
    ends = np.zeros((len(checked.kept), 2), np.float64)
    longest = max(len(ids) for ids in checked.clean_ids)
    groups = length_groups(checked, batch or _fitting_pairs(model, g, longest, len(checked.kept), method))
    for done, group in enumerate(groups):
        ids_c, ids_x, a, b = (torch.tensor([part[i] for i in group], device=model.device) for part in
                             (checked.clean_ids, checked.corrupted_ids, checked.answers, checked.wrongs))
        scores, ends[group] = (_eap_batch(model, g, ids_c, ids_x, a, b) if method == "eap"
                               else _ig_batch(model, g, ids_c, ids_x, a, b, int(steps)))
        per_pair[group] = scores[:, allowed]
        report(progress, (done + 1) / len(groups), f"Batch {done + 1} of {len(groups)}")
    table = edges.table(g, np.zeros(allowed.shape))[["sender", "receiver", "input"]]
    if not np.isfinite(per_pair).all():  # half precision can overflow in the backward pass
        raise finite.NotFiniteError(finite.message(model, f"edge scores ({method.upper()})"))
    gap = np.abs(ends[:, 0] - ends[:, 1]) >= 1e-6  # a pair with no gap has nothing to attribute: left out
    left_out = dict(checked.left_out)
    if not gap.all():
        left_out["no gap between the clean and the corrupted logit difference"] = int((~gap).sum())
    if not gap.any():
        raise InputError(f"No pair of {prompts.source!r} moves the logit difference between its two prompts.")
    values, ends = per_pair[gap], ends[gap]
    if metric == "normalised":
        values = values / (ends[:, 0] - ends[:, 1])[:, None]
    low, high = bootstrap_interval(values, resamples=resamples, level=level, seed=seed)
    table = table.reset_index(drop=True).assign(mean=values.mean(0), low=low, high=high)
    return TaskEdges(table, values.astype(np.float32), method, steps if method == "eap-ig" else 1, metric,
                     ends[:, 0], ends[:, 1], kept=[k for k, g_ in zip(checked.kept, gap) if g_], left_out=left_out,
                     source=prompts.source, level=level, resamples=resamples, seed=seed)


def edge_attribution(model: LoadedModel, clean, corrupted: str | None = None, answer=None, wrong=None, *,
                     method: str = "eap", steps: int = 5, max_tokens: int | None = None, progress=None,
                     **over_a_set):
    """Every edge's estimated effect on m: of one prompt pair (`circuits.edges.edge_attribution`: `Edges`), or,
    when `clean` is a `PromptSet`, of a task (`edge_attribution_set`: `TaskEdges`, each edge's mean over the
    pairs with its bootstrap interval; `over_a_set`: metric, batch, resamples, level, seed)."""
    if is_task(clean, corrupted, over_a_set, "edge_attribution"):
        return edge_attribution_set(model, clean, method=method, steps=steps, max_tokens=max_tokens,
                                    progress=progress, **over_a_set)
    return edges.edge_attribution(model, clean, corrupted, answer, wrong, method=method, steps=steps,
                                  max_tokens=max_tokens, progress=progress)
