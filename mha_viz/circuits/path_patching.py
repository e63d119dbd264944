"""The real thing behind `edge_attribution`'s estimates: path patching one edge (`path_patch`, many in
batched forwards with `path_patch_many`) and running a circuit (`circuit`, `faithfulness_curve`).

- Path patching s → r: the clean run, with receiver r's input given s's corrupted write in place of its
  clean one and everything else clean; the change in m.
- A circuit: the clean text run with only the circuit's edges carrying the run's own writes and every
  other edge carrying the corrupted run's (the convention of the EAP and ACDC papers). Its faithfulness
  is (m_circuit − m_corrupted) / (m_clean − m_corrupted): 1 with every edge, 0 with none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mha_viz.budget import capture_budget
from mha_viz.circuits.edges import Edges, Runs, check_budget, graph, receiver_bytes, recorded
from mha_viz.interventions.patching import logit_difference, texts
from mha_viz.progress import report
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.reading import split_run

BATCH_BYTES = 256 * 2**20  # a batch of patched runs holds about this much beyond the model (CPU or GPU)
SHARES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # a faithfulness curve's k, as shares of the edges


def curve_sizes(total: int) -> list[int]:
    """The k of a faithfulness curve over `total` edges: 0, then SHARES of them, at least 1 edge, each once."""
    return sorted({0, *(max(1, int(round(share * total))) for share in SHARES)})


def _runs(model: LoadedModel, clean: str, corrupted: str, answer, wrong, max_tokens, what: str) -> Runs:
    """Both texts checked, within the memory budget, and run once each recording every write."""
    t = texts(model, clean, corrupted, answer, wrong, None, max_tokens, what=what)
    g = graph(model)
    check_budget(model, g, t.n, 1, f"{what[0].upper()}{what[1:]} on {model.name}")
    return recorded(model, t, g)


def edge_pairs(edges) -> list[tuple[str, str]]:
    """(sender, receiver) pairs from a DataFrame with those columns, `Edges`, or an iterable of pairs."""
    if isinstance(edges, Edges):
        edges = edges.scores
    if isinstance(edges, pd.DataFrame):
        return list(zip(edges["sender"], edges["receiver"]))
    return [(str(s), str(r)) for s, r in edges]


def _ends_of(edges, answer, wrong):
    """answer and wrong, defaulting to those an `Edges` was computed on (its m, not each run's prediction)."""
    if isinstance(edges, Edges):
        return (edges.answer if answer is None else answer), (edges.wrong if wrong is None else wrong)
    return answer, wrong


def _indices(runs: Runs, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    g = runs.g
    try:
        s = np.asarray([g.sender_index(a) for a, _ in pairs], dtype=int)
        r = np.asarray([g.receiver_index(b) for _, b in pairs], dtype=int)
    except KeyError as exc:
        raise InputError(str(exc.args[0])) from None
    later = g.sender_order[s] < g.receiver_order[r]
    if not later.all():
        a, b = pairs[int(np.argmin(later))]
        raise InputError(f"{a} does not write before {b} reads: there is no edge {a} → {b}.")
    return s, r


def _rows(model: LoadedModel, runs: Runs, per_row: int) -> int:
    """How many patched runs go in one batch: BATCH_BYTES (or the capture budget, if smaller) over a row's bytes."""
    row = model.attention_bytes(runs.t.n) // max(model.num_layers, 1) * 4 + per_row
    budget = min(BATCH_BYTES, capture_budget.capture_budget())
    return max(1, int(budget // max(row, 1)))


def path_patch_many(model: LoadedModel, clean: str, corrupted: str, edges, answer=None, wrong=None, *,
                    max_tokens: int | None = None, progress=None) -> np.ndarray:
    """The real change in m of path patching each edge (sender, receiver), in batched forwards of the
    clean text (one row an edge): (len(edges),) float64. The refusals of `patch_heads`; InputError
    for a name that is not a sender or a receiver, or a sender that does not write before the receiver
    reads. Given `Edges`, answer and wrong default to its own. progress(fraction, message) after each batch (a
    callback that raises stops it)."""
    return path_patch_ends(model, clean, corrupted, edges, answer, wrong, max_tokens=max_tokens, progress=progress)[0]


def path_patch_ends(model: LoadedModel, clean: str, corrupted: str, edges, answer=None, wrong=None, *,
                    max_tokens: int | None = None, progress=None) -> tuple[np.ndarray, float, float]:
    """`path_patch_many`'s changes, and m on the clean and on the corrupted text (what a task normalises by)."""
    pairs = edge_pairs(edges)
    answer, wrong = _ends_of(edges, answer, wrong)
    runs = _runs(model, clean, corrupted, answer, wrong, max_tokens, "path patching")
    return _patched(model, runs, pairs, progress), float(runs.e.m_clean), float(runs.e.m_corr)


def _patched(model: LoadedModel, runs: Runs, pairs, progress=None) -> np.ndarray:
    s, r = _indices(runs, pairs)
    n, d = runs.t.n, model.d_model
    delta = torch.cat([torch.zeros(1, n, d, device=runs.clean.device),  # row 0: nothing patched, the baseline
                       (runs.corrupted.float() - runs.clean.float())[torch.as_tensor(s)]])  # float32: no cancelling
    receivers = [0, *r.tolist()]
    chunk = _rows(model, runs, 4 * n * d * (model.num_heads + 2 * model.num_kv_heads + 2))
    out = np.zeros(len(receivers))
    with model.lock, torch.inference_mode():
        for start in range(0, len(receivers), chunk):
            stop = min(start + chunk, len(receivers))
            provider = split_run.Fixed(receivers[start:stop], delta[start:stop])
            logits = split_run.run(model, runs.g, provider, input_ids=runs.t.ids_c.expand(stop - start, -1))
            out[start:stop] = logit_difference(logits.float(), runs.e.a, runs.e.b).double().cpu().numpy()
            done = max(stop - 1, 0)  # the first row is the unpatched run
            report(progress, done / max(len(pairs), 1), f"Patched {done} of {len(pairs)} edges")
    return out[1:] - out[0]  # the unpatched row took the same path: an edge that changes nothing reads 0


def path_patch(model: LoadedModel, clean: str, corrupted: str, sender: str, receiver: str, answer=None,
               wrong=None, *, max_tokens: int | None = None) -> float:
    """The real change in m when `receiver` (a receiver name: "L5H1.k", "L3 MLP", "logits") reads
    `sender`'s corrupted write in place of its clean one in the clean run, all else clean."""
    return float(path_patch_many(model, clean, corrupted, [(sender, receiver)], answer, wrong,
                                 max_tokens=max_tokens)[0])


@dataclass
class Circuit:
    """A circuit run for real: its edges, m with only them clean, and its faithfulness."""

    edges: list[tuple[str, str]]
    m_circuit: float
    m_clean: float
    m_corrupted: float

    @property
    def faithfulness(self) -> float:
        return (self.m_circuit - self.m_corrupted) / (self.m_clean - self.m_corrupted)


def _circuits(model: LoadedModel, runs: Runs, circuits: list[tuple[np.ndarray, np.ndarray]],
              progress=None) -> np.ndarray:
    """m of the clean text run with each circuit's edges only ((sender, receiver) indices, `_indices`)
    carrying the run's writes, batched."""
    g, n, d = runs.g, runs.t.n, model.d_model
    S, R = len(g.senders), len(g.receivers)
    chunk = _rows(model, runs, 4 * (S * R + R * n * d + 2 * S * n * d) + receiver_bytes(model, g, n) // 3)
    out = np.zeros(len(circuits))
    with model.lock, torch.inference_mode():
        for start in range(0, len(circuits), chunk):
            part = circuits[start:start + chunk]
            weights = torch.ones(len(part), S, R, device=runs.clean.device)  # 1: the corrupted write
            for row, (s, r) in enumerate(part):
                weights[row, torch.as_tensor(s, dtype=torch.long), torch.as_tensor(r, dtype=torch.long)] = 0.0
            provider = split_run.Mixed(g, weights, runs.corrupted)
            logits = split_run.run(model, g, provider, input_ids=runs.t.ids_c.expand(len(part), -1))
            out[start:start + len(part)] = logit_difference(logits.float(), runs.e.a, runs.e.b).double().cpu().numpy()
            done = start + len(part)
            report(progress, done / len(circuits), f"Ran {done} of {len(circuits)} circuits")
    return out


def circuit(model: LoadedModel, clean: str, corrupted: str, edges, answer=None, wrong=None, *,
            max_tokens: int | None = None) -> Circuit:
    """The clean text run with only `edges` ((sender, receiver) pairs, a DataFrame or `Edges`, whose answer
    and wrong tokens are then the defaults) carrying clean writes and every other edge the corrupted ones:
    m and the faithfulness."""
    pairs = edge_pairs(edges)
    answer, wrong = _ends_of(edges, answer, wrong)
    runs = _runs(model, clean, corrupted, answer, wrong, max_tokens, "a circuit")
    m = _circuits(model, runs, [_indices(runs, pairs)])[0]
    return Circuit(pairs, float(m), runs.e.m_clean, runs.e.m_corr)


def faithfulness_curve(model: LoadedModel, clean: str, corrupted: str, edges_df, sizes, answer=None, wrong=None, *,
                       max_tokens: int | None = None, progress=None) -> pd.DataFrame:
    """For each k in `sizes`, the circuit of the k edges of largest |score| in `edges_df` (a DataFrame
    with sender, receiver and score, or `Edges`, whose answer and wrong tokens are then the defaults),
    run for real in batches: a DataFrame with k, faithfulness and m."""
    answer, wrong = _ends_of(edges_df, answer, wrong)
    if isinstance(edges_df, Edges):
        edges_df = edges_df.scores
    order = np.argsort(-edges_df["score"].abs().to_numpy(), kind="stable")
    ranked = list(zip(edges_df["sender"].to_numpy()[order], edges_df["receiver"].to_numpy()[order]))
    ks = [max(0, min(int(k), len(ranked))) for k in sizes]
    runs = _runs(model, clean, corrupted, answer, wrong, max_tokens, "a circuit")
    s, r = _indices(runs, ranked)  # once: each circuit is a prefix of the ranking
    m = _circuits(model, runs, [(s[:k], r[:k]) for k in ks], progress)
    gap = runs.e.m_clean - runs.e.m_corr
    curve = pd.DataFrame({"k": ks, "faithfulness": (m - runs.e.m_corr) / gap, "m": m})
    curve.attrs.update(m_clean=float(runs.e.m_clean), m_corrupted=float(runs.e.m_corr))  # what it is a share of
    return curve
