"""Path patching and circuits over a task (`PromptSet`): per pair the same as `circuits.path_patching` gives for that
pair alone (`path_patch_many`: each edge's real change in m; `faithfulness_curve`: the faithfulness of the circuit
of the k edges of largest |score|, for each k), then the mean over the pairs with its bootstrap interval
(`tasks.uncertainty`), and for path patching a sign-flip p-value per edge. The pairs run one at a time: each pair's
edges or circuits already run in batched forwards. A pair with no gap between its clean and corrupted logit
difference is left out and counted: nothing can be a share of it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha_viz.circuits import path_patching
from mha_viz.interventions.patching import NoGap, require_decoder
from mha_viz.progress import report
from mha_viz.tasks.patching_set import METRICS, NO_GAP
from mha_viz.tasks.prompt_set import PromptSet, check, is_task
from mha_viz.tasks.uncertainty import MeanOverPairs, OverPairs, bootstrap_interval, mean_over_pairs
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel


@dataclass
class TaskPathPatching(MeanOverPairs):
    """Path patching of edges over a task. per_pair (pairs, edges): each kept pair's change in m when the edge's
    sender writes its corrupted output into the receiver (metric "normalised": as a share of the pair's gap
    m_clean − m_corrupted); mean, low, high, p_value (edges,): their mean, its interval, the sign-flip p-value."""
    edges: list[tuple[str, str]]
    metric: str


@dataclass
class TaskFaithfulness(OverPairs):
    """A circuit's faithfulness over a task. curve: k (the circuit of the k edges of largest |score|), mean, low and
    high over the pairs; per_pair (pairs, sizes): each kept pair's faithfulness at each k."""
    curve: pd.DataFrame
    per_pair: np.ndarray

    @property
    def faithfulness(self) -> float:
        """The mean faithfulness of the largest circuit asked for."""
        return float(self.curve["mean"].iloc[-1])


def _each_pair(model: LoadedModel, prompts: PromptSet, max_tokens, progress, one) -> tuple[list, list[int], dict]:
    """one(pair) of each pair `model` can run, in order: (the results, the kept pairs' indices, the pairs left out by
    reason, a pair whose texts give the same logit difference among them); InputError when none is left."""
    checked = check(model, prompts, max_tokens)
    results, kept, left_out = [], [], dict(checked.left_out)
    for i, index in enumerate(checked.kept):
        try:
            results.append(one(prompts.pairs[index]))
            kept.append(index)
        except NoGap:
            left_out[NO_GAP] = left_out.get(NO_GAP, 0) + 1
        report(progress, (i + 1) / len(checked.kept), f"Pair {i + 1} of {len(checked.kept)}")
    if not results:
        raise InputError(f"No pair of {prompts.source!r} moves the logit difference between its two prompts.")
    return results, kept, left_out


def path_patch_set(model: LoadedModel, prompts: PromptSet, edges, *, metric: str = "normalised",
                   resamples: int = 1000, level: float = 0.95, seed: int = 0, max_tokens: int | None = None,
                   progress=None) -> TaskPathPatching:
    """Path patching of every edge of `edges` ((sender, receiver) pairs or a DataFrame with those columns) on every
    pair of `prompts` (see the module). A pair whose texts give the same logit difference is left out and counted."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    require_decoder(model, "path patching over a task")
    def one(pair):
        return path_patching.path_patch_ends(model, pair.clean, pair.corrupted, edges, pair.answer, pair.wrong,
                                             max_tokens=max_tokens)
    results, kept, left_out = _each_pair(model, prompts, max_tokens, progress, one)
    values = np.stack([moved / ((m_clean - m_corrupted) if metric == "normalised" else 1.0)
                       for moved, m_clean, m_corrupted in results])
    pairs = [(str(s), str(r)) for s, r in path_patching.edge_pairs(edges)]
    return TaskPathPatching(pairs, metric, **mean_over_pairs(values, resamples=resamples, level=level, seed=seed),
                            kept=kept, left_out=left_out, source=prompts.source, level=level, resamples=resamples,
                            seed=seed)

def _ranked(edges) -> pd.DataFrame:
    """sender, receiver and score of `edges`: a DataFrame with a score (or a task's mean), a `TaskEdges`, `Edges`, or
    (sender, receiver) pairs, all equal (their order kept)."""
    table = getattr(edges, "table", getattr(edges, "scores", edges))  # a task's edges, or one pair's `Edges`
    if not isinstance(table, pd.DataFrame):
        pairs = path_patching.edge_pairs(table)
        return pd.DataFrame({"sender": [s for s, _ in pairs], "receiver": [r for _, r in pairs], "score": 1.0})
    return table if "score" in table.columns else table.rename(columns={"mean": "score"})


def faithfulness_set(model: LoadedModel, prompts: PromptSet, edges_df: pd.DataFrame, sizes, *,
                     resamples: int = 1000, level: float = 0.95, seed: int = 0, max_tokens: int | None = None,
                     progress=None) -> TaskFaithfulness:
    """The faithfulness curve of the edges of `edges_df` (sender, receiver and score; a task's `TaskEdges`, its mean
    the score; or (sender, receiver) pairs) ranked by |score|, for each k in `sizes`, on every pair."""
    require_decoder(model, "a circuit over a task")
    ranked = _ranked(edges_df)
    def one(pair):
        return path_patching.faithfulness_curve(model, pair.clean, pair.corrupted, ranked, sizes, pair.answer,
                                                pair.wrong, max_tokens=max_tokens)
    curves, kept, left_out = _each_pair(model, prompts, max_tokens, progress, one)
    values = np.stack([c["faithfulness"].to_numpy(np.float64) for c in curves])
    ks = curves[0]["k"].to_numpy()
    low, high = bootstrap_interval(values, resamples=resamples, level=level, seed=seed)
    curve = pd.DataFrame({"k": ks, "mean": values.mean(0), "low": low, "high": high})
    return TaskFaithfulness(curve, values, kept=kept, left_out=left_out, source=prompts.source, level=level,
                            resamples=resamples, seed=seed)


def path_patch_many(model: LoadedModel, clean, corrupted: str | None = None, edges=None, answer=None, wrong=None, *,
                    max_tokens: int | None = None, progress=None, **over_a_set):
    """Path patching of many edges: of one pair (`circuits.path_patching.path_patch_many`: each edge's change in
    m), or, when `clean` is a `PromptSet`, over a task (`path_patch_set`: a `TaskPathPatching`; `over_a_set`:
    metric, resamples, level, seed)."""
    if is_task(clean, corrupted, over_a_set, "path_patch_many"):
        return path_patch_set(model, clean, edges, max_tokens=max_tokens, progress=progress, **over_a_set)
    return path_patching.path_patch_many(model, clean, corrupted, edges, answer, wrong, max_tokens=max_tokens,
                                         progress=progress)


def circuit(model: LoadedModel, clean, corrupted: str | None = None, edges=None, answer=None, wrong=None, *,
            max_tokens: int | None = None, progress=None, **over_a_set):
    """A circuit run for real: on one pair (`circuits.path_patching.circuit`: a `Circuit`), or, when `clean` is a
    `PromptSet`, over a task (`faithfulness_set` of the circuit of all of `edges`, a DataFrame with sender,
    receiver and score: a `TaskFaithfulness` whose one k is their number; `over_a_set`: resamples, level,
    seed)."""
    if is_task(clean, corrupted, over_a_set, "circuit"):
        return faithfulness_set(model, clean, edges, [len(edges)], max_tokens=max_tokens, progress=progress,
                                **over_a_set)
    if progress is not None:
        raise TypeError("progress: an option of a PromptSet, not of one pair")
    return path_patching.circuit(model, clean, corrupted, edges, answer, wrong, max_tokens=max_tokens)
