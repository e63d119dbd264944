"""Every edge of a decoder's circuit estimated at once (`edge_attribution`): edge attribution patching
(EAP, Syed et al. 2023) and its integrated-gradients form (EAP-IG, Hanna et al. 2024), on a clean and a
corrupted text and the metric m = logit(answer) − logit(wrong) of `patch_heads`.

An edge runs from a sender (the embedding, a head's z_h W_O[h], an MLP) to a receiver that reads the
stream after it (a head's q, a KV head's k or v, an MLP's input, the logits). Its score estimates what
putting the sender's corrupted write into that receiver's input alone, in the clean run, does to m:

    score(s → r) = Σ_positions (a_s(corrupted) − a_s(clean)) · ∂m/∂(r's input)

with the gradient taken on the clean run (EAP), or averaged over `steps` runs whose input embeddings
lie on the straight line from the corrupted text's to the clean one's (EAP-IG). Each receiver reads
its own copy of its input (`mha_viz_models.reading.split_run`), so one backward pass gives every
receiver's gradient; `mha_viz.circuits.path_patching` measures the real thing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from mha_viz.capture import finite
from mha_viz.interventions.ablation import GradientBudget, check_gradient_budget
from mha_viz.interventions.patching import Ends, Texts, ends, logit_difference, texts
from mha_viz.progress import report
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.reading import readout, split_run
from mha_viz_models.reading.edge_graph import EdgeGraph

METHODS = ("eap", "eap-ig")
COLUMNS = ["sender", "receiver", "input", "score"]
SHAPE = ("layers", "heads", "kv_heads")  # what a saved circuit's graph is drawn on
NODE = r"embed|logits|L\d{1,4}(?:H\d{1,4}(?:\.[qkv])?|KV\d{1,4}\.[kv]| MLP)"  # a sender's or a receiver's name


@dataclass
class Edges:
    """Every edge's estimated effect on m: `scores` (sender, receiver, input, score), with the ends of
    the metric and how it was computed."""

    scores: pd.DataFrame
    method: str
    steps: int
    m_clean: float
    m_corrupted: float
    answer: int
    wrong: int
    model: str
    tokens: int
    answer_text: str = ""
    wrong_text: str = ""
    extra: dict = field(default_factory=dict)

    def top(self, k: int) -> pd.DataFrame:
        """The k edges of largest |score|, largest first."""
        order = np.argsort(-self.scores["score"].abs().to_numpy(), kind="stable")[: max(int(k), 0)]
        return self.scores.iloc[order].reset_index(drop=True)

    def to_json(self, **extra) -> str:
        """The edges, their scores and what they were computed on, as JSON (`from_json` reads it back)."""
        meta = {key: getattr(self, key) for key in ("method", "steps", "m_clean", "m_corrupted", "answer", "wrong",
                                                    "model", "tokens", "answer_text", "wrong_text")}
        rows = self.scores[COLUMNS].to_dict(orient="split")["data"]
        return json.dumps({**meta, **self.extra, **extra, "edges": rows})

    @classmethod
    def from_json(cls, text: str) -> "Edges":
        """Edges saved by `to_json`; ValueError, saying what is wrong, for a file that is not one."""
        try:
            data = json.loads(text)
        except ValueError:
            raise ValueError("not a circuit saved by mha-viz: it is not JSON") from None
        try:
            frame = pd.DataFrame(data.pop("edges"), columns=COLUMNS)
            meta = {key: data.pop(key) for key in ("method", "steps", "m_clean", "m_corrupted", "answer", "wrong",
                                                   "model", "tokens", "answer_text", "wrong_text")}
            frame["score"] = frame["score"].astype(float)
            for key in ("steps", "answer", "wrong", "tokens", *SHAPE):
                if key in meta or key in data:
                    value = meta[key] if key in meta else data[key]
                    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                        raise ValueError
            for key in ("m_clean", "m_corrupted"):
                meta[key] = float(meta[key])
        except KeyError as exc:
            raise ValueError(f"not a circuit saved by mha-viz: it has no {exc.args[0]!r}") from None
        except (ValueError, TypeError, AttributeError, AssertionError):
            raise ValueError("not a circuit saved by mha-viz: its edges or counts are not what it writes") from None
        if meta["method"] not in METHODS:
            raise ValueError(f"not a circuit saved by mha-viz: its method is {str(meta['method'])[:20]!r}")
        names = pd.concat([frame["sender"], frame["receiver"]]).astype(str)
        bad = names[~names.str.fullmatch(NODE)]
        if len(bad):
            raise ValueError(f"not a circuit saved by mha-viz: {str(bad.iloc[0])[:30]!r} is not a node")
        if "curve" in data and not (isinstance(data["curve"], dict) and {"k", "faithfulness"} <= set(data["curve"])):
            data.pop("curve")  # a curve that cannot be drawn is left out, not a reason to refuse the edges
        return cls(frame, **meta, extra=data)


def graph(model: LoadedModel) -> EdgeGraph:
    """The model's senders and receivers (`split_run.graph_of`); InputError naming why a family is refused."""
    try:
        return split_run.graph_of(model)
    except UnsupportedArchitecture as exc:
        raise InputError(str(exc)) from None


def receiver_bytes(model: LoadedModel, g: EdgeGraph, n: int, rows: int = 1) -> int:
    """About the bytes a split run holds beyond a plain forward: each layer's per-receiver inputs, normed
    copies and their gradients (3 × (H + 2G + 1) n d) and every sender's write on both texts (2 S n d)."""
    width = 2 if model.dtype != torch.float32 else 4
    per_layer = g.num_heads + 2 * g.num_kv_heads + 1
    return int(width * n * model.d_model * (rows * 3 * per_layer * len(g.layers) + 2 * len(g.senders)))


def attributing(model: LoadedModel, method: str) -> str:
    """What a refusal of edge attribution says it was doing."""
    return f"Attributing every edge of {model.name} ({method.upper()})"


def check_budget(model: LoadedModel, g: EdgeGraph, n: int, rows: int, doing: str) -> None:
    """GradientBudget (an InputError) when `rows` gradient passes side by side over n tokens with every
    receiver's own input would not fit (`ablation.check_gradient_budget`)."""
    rows_of_logits = 1 if readout.keeps_last_logits(model.hf_model) else None
    check_gradient_budget(model, n, doing=doing, logit_rows=rows_of_logits, rows=rows,
                          extra=receiver_bytes(model, g, n, rows))


@dataclass
class Runs:
    """Both texts run once with every write recorded: (S, n, d) each, and the metric's ends."""

    t: Texts
    g: EdgeGraph
    clean: torch.Tensor
    corrupted: torch.Tensor
    e: Ends


def recorded(model: LoadedModel, t: Texts, g: EdgeGraph) -> Runs:
    """Both checked texts (`patching.texts`) run side by side in one batch recording every sender's
    write, and the ends."""
    with model.lock, torch.inference_mode():
        rec = split_run.Recorder()
        logits = split_run.run(model, g, rec, input_ids=torch.cat([t.ids_c, t.ids_x]))
    writes = rec.writes()
    return Runs(t, g, writes[0], writes[1], ends(model, t, logits[:1], logits[1:]))


def gradients(model: LoadedModel, g: EdgeGraph, ids_c: torch.Tensor, ids_x: torch.Tensor, metric):
    """EAP's runs of a batch of text pairs (B, n) each: the corrupted texts recorded, then the clean ones with a
    gradient leaf a receiver (their writes recorded too). metric(logits_c, logits_x) -> (m (B,), anything): what
    each row's gradient is of. Returns (clean writes (B, S, n, d), corrupted writes, ∂m_b/∂(each receiver's
    input of row b) (B, R, n, d), metric's anything); rows never mix (m's sum has row b's gradient in row b)."""
    with model.lock:
        with torch.inference_mode():
            rx = split_run.Recorder()
            logits_x = split_run.run(model, g, rx, input_ids=ids_x)
        with torch.inference_mode(False), torch.enable_grad():
            leaves = split_run.Leaves((ids_c.shape[0], ids_c.shape[1], model.d_model), model.dtype, record=True)
            logits = split_run.run(model, g, leaves, input_ids=ids_c)
            m, what = metric(logits, logits_x)
            grads = leaves.grads(m.sum())
    return leaves.writes(), rx.writes(), grads, what


def _eap(model: LoadedModel, t: Texts, g: EdgeGraph) -> tuple[Runs, torch.Tensor]:
    """One pair's EAP runs (`gradients`): both runs and ∂m/∂(each receiver's input) (R, n, d)."""
    def metric(logits, logits_x):
        e = ends(model, t, logits.detach(), logits_x)
        return logit_difference(logits.float(), e.a, e.b), e
    clean, corrupted, grads, e = gradients(model, g, t.ids_c, t.ids_x, metric)
    return Runs(t, g, clean[0], corrupted[0], e), grads[0]


def _integrated(model: LoadedModel, runs: Runs, steps: int, batch: int, progress=None) -> torch.Tensor:
    """∂m/∂(each receiver's input) (R, n, d) averaged over `steps` runs whose input embeddings go from the
    corrupted text's to the clean one's (α = 1/steps … 1), `batch` of them side by side."""
    t, e, g = runs.t, runs.e, runs.g
    embed = model.hf_model.get_input_embeddings()
    with torch.inference_mode():
        clean, corrupt = embed(t.ids_c).float(), embed(t.ids_x).float()
    total = None
    for start in range(0, steps, batch):
        rows = min(batch, steps - start)
        alpha = (torch.arange(start + 1, start + rows + 1, dtype=torch.float32, device=clean.device) / steps)
        points = (corrupt + alpha[:, None, None] * (clean - corrupt)).to(model.dtype)  # (rows, n, d)
        part = interpolated_gradients(model, g, t.ids_c.expand(rows, -1), points, e.a, e.b).sum(0)
        total = part if total is None else total + part
        report(progress, 0.3 + 0.6 * (start + rows) / steps, f"Gradient at {start + rows} of {steps} points")
    return total / steps


def interpolated_gradients(model: LoadedModel, g: EdgeGraph, ids: torch.Tensor, points: torch.Tensor, a, b
                           ) -> torch.Tensor:
    """∂m/∂(each receiver's input) (rows, R, n, d) of one run of `ids` (rows, n) whose input embeddings are
    `points` (rows, n, d) instead of its tokens', m = logit(a) − logit(b) at the last position of each row (a, b:
    token ids, one for every row or one a row): EAP-IG's run at points of the path between two prompts."""
    embed = model.hf_model.get_input_embeddings()
    with model.lock, torch.inference_mode(False), torch.enable_grad():
        leaves = split_run.Leaves((ids.shape[0], ids.shape[1], model.d_model), model.dtype, record=False)
        hook = embed.register_forward_hook(lambda _m, _a, _out: points)  # interpolated
        try:
            logits = split_run.run(model, g, leaves, input_ids=ids)
        finally:
            hook.remove()
        last, rows = logits[:, -1].float(), torch.arange(ids.shape[0], device=logits.device)
        return leaves.grads((last[rows, a] - last[rows, b]).sum())  # row r's gradient in row r


def fitting_rows(model: LoadedModel, g: EdgeGraph, n: int, steps: int) -> int:
    """How many of EAP-IG's `steps` gradient runs fit side by side in the memory budget (at least 1:
    `check_budget` refuses a text that one does not fit)."""
    for rows in range(steps, 1, -1):
        try:
            check_budget(model, g, n, rows, "")
            return rows
        except GradientBudget:
            continue
    return 1


def edge_attribution(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None, *,
                     method: str = "eap", steps: int = 5, max_tokens: int | None = None, progress=None,
                     read: Texts | None = None) -> Edges:
    """Every edge's estimated effect on m (`Edges.scores`: sender, receiver, input, score), by EAP (one
    forward on each text, one backward) or EAP-IG (`steps` more forwards and backwards, side by side as far
    as the memory budget allows). The defaults and refusals of `patch_heads`; InputError for a family whose
    heads' writes cannot be split, and before anything runs when the backward pass would not fit the memory.
    progress(fraction, message) between the steps (a callback that raises stops it). read: the texts already read
    (`patching.texts`) and their backward pass checked (`check_budget`), by a plan: neither is done again."""
    if method not in METHODS:
        raise ValueError(f"method must be 'eap' or 'eap-ig', not {method!r}")
    if int(steps) < 1:
        raise ValueError("steps must be at least 1")
    steps = int(steps)
    g = graph(model)
    t = read
    if t is None:
        t = texts(model, clean, corrupted, answer, wrong, None, max_tokens, what="edge attribution")
        check_budget(model, g, t.n, 1, attributing(model, method))
    if method == "eap":
        report(progress, 0.1, "One backward pass through every receiver…")
        runs, grads = _eap(model, t, g)
    else:
        runs = recorded(model, t, g)
        report(progress, 0.3, f"{steps} backward passes on the path between the texts…")
        grads = _integrated(model, runs, steps, fitting_rows(model, g, t.n, steps), progress)
    report(progress, 0.9, "Scoring every edge…")
    delta = (runs.corrupted.float() - runs.clean.float()).to(grads.device)  # (S, n, d)
    scores = torch.einsum("snd,rnd->sr", delta, grads).cpu().numpy().astype(np.float64)
    if not np.isfinite(scores[g.allowed]).all():  # half precision can overflow in the backward pass
        raise finite.NotFiniteError(finite.message(model, f"edge scores ({method.upper()})"))
    frame = table(g, scores)
    names = [model.tokenizer.decode([i]) for i in (runs.e.a, runs.e.b)]
    report(progress, 1.0, "Done")
    shape = {"layers": len(g.layers), "heads": g.num_heads, "kv_heads": g.num_kv_heads,
             "parallel": any(p.parallel for p in g.layers), "clean": clean, "corrupted": corrupted}
    return Edges(frame, method, steps if method == "eap-ig" else 1, runs.e.m_clean, runs.e.m_corr, runs.e.a,
                 runs.e.b, model.name, t.n, *names, extra=shape)


def table(g: EdgeGraph, scores: np.ndarray) -> pd.DataFrame:
    """(S, R) scores of the allowed edges as rows: sender, receiver, input, score."""
    s, r = np.nonzero(g.allowed)
    senders, receivers = np.asarray(g.senders, dtype=object), g.receivers
    return pd.DataFrame({"sender": senders[s], "receiver": [receivers[i].name for i in r],
                         "input": [receivers[i].input for i in r], "score": scores[s, r]})
