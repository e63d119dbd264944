"""Multi-head attention step by step, with a model's real numbers (the teaching view).

`walkthrough(model, text, layer, head)` returns every intermediate tensor of one head, in the
order of the computation: X → Q, K, V → QKᵀ → ÷ √d_k → mask → softmax → × V → concatenation
of all heads → × W_O. The tensors come from the model's own weights and the layer's actual
input (recorded during one forward pass), so the probabilities are the ones every other view
shows. `costs` gives FLOPs and memory of attention for MHA, GQA and MQA from the corrected
formulas (`docs/head-metrics.md`, section 5), and the demonstration helpers show why attention needs
projections, several heads and masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_viz.budget.plan import Plan, forward
from mha_viz.scan.rows import lean_layers
from mha_viz.scan.spill import QKSpill
from mha_viz.text.tokenize import tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.attention.heads import kv_head
from mha_viz_models.attention.visibility import hidden_keys, sink_column

TEACH_TOKENS = 64  # the window of queries (and keys) the steps show: beyond this the heatmaps stop being readable


@dataclass
class Walkthrough:
    """One head's steps over a window of the text: queries `start` … `start` + n − 1 against the keys of the same
    window, the other keys they may see (a decoder's earlier ones, an encoder's on both sides) folded into one more
    term of each row (`outside_*`) so that every row's softmax is exact: the window's probabilities are the model's,
    and `outside_probs` is what those keys take together."""

    tokens: list[str]  # the window's tokens
    layer: int
    head: int
    kv_head: int
    num_heads: int
    num_kv_heads: int
    scale: float
    is_causal: bool
    rope: bool  # whether rotary position embeddings turn q, k before the scores
    X: np.ndarray  # (n, d_model): the layer's input (after the layer norm for pre-LN models)
    W_Q: np.ndarray  # (d_model, d_k)
    W_K: np.ndarray  # (d_model, d_k)
    W_V: np.ndarray  # (d_model, d_v)
    W_O: np.ndarray  # (d_v, d_model): the rows of W_O that read this head
    Q: np.ndarray  # (n, d_k) = X W_Q (+ b_Q, when `qkv_bias`; then RoPE, when `rope`)
    K: np.ndarray  # (n, d_k)
    V: np.ndarray  # (n, d_v)
    scores: np.ndarray  # (n, n) = Q Kᵀ
    scaled: np.ndarray  # (n, n) = Q Kᵀ · scale
    masked: np.ndarray  # (n, n) with -inf where a query may not look (causal, a window, a chunk)
    probs: np.ndarray  # (n, n) = softmax over each row (with the keys outside the window in its sum)
    z: np.ndarray  # (n, d_v) = probs V over every key of the text
    concat: np.ndarray  # (n, H · d_v): every head's z side by side
    output: np.ndarray  # (n, d_model) = concat W_O (+ b_O, when `out_bias`)
    head_output: np.ndarray  # (n, d_model) = z W_O[h]: this head's share of the output
    softcap: float | None = None  # Gemma 2: `scaled` is softcap · tanh(Q Kᵀ · scale / softcap)
    window: int | None = None  # a sliding window: `masked` also hides keys `window` or more back
    # (an encoder's: keys more than `window` away on either side)
    q_norm: bool = False  # Qwen3: each head's q and k pass an RMSNorm before RoPE
    qkv_bias: bool = True  # whether the Q, K and V projections add a bias (BERT, Qwen2: yes; Llama: no)
    out_bias: bool = True  # whether W_O adds one (BERT: yes; Llama, Qwen2: no)
    sink: float | None = None  # GPT-OSS: the head's learned sink logit; each row of `probs` lacks its share
    start: int = 0  # the window's first token in the text
    total: int = 0  # the tokens recorded (0: the window's): the text's, or a decoder's up to the window's end
    # the keys outside the window that its queries may see, folded into one term of each row: a decoder's earlier
    # keys (its later ones are always hidden), an encoder's on both sides
    outside: int = 0
    # (n,) each, None when no key is folded: log Σ e^s over those keys of each row's scores, scaled scores and
    # masked scores (−inf where none is visible), so that softmax over a row's window and this one term gives the
    # window's probabilities exactly, and the share those keys take together
    outside_scores: np.ndarray | None = None
    outside_scaled: np.ndarray | None = None
    outside_masked: np.ndarray | None = None
    outside_probs: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.total = self.total or len(self.tokens)

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def outside_label(self) -> str:
        """The name of the column that stands for the keys outside the window."""
        return f"⟨{self.outside:,} earlier keys⟩" if self.is_causal else f"⟨{self.outside:,} keys outside⟩"


@dataclass(frozen=True)
class Recording:
    """One forward pass over a text, kept so that every layer and head can be walked through
    without running the model again: the tokens and each attention layer's queries, keys, values
    and input (a spill: a long run's own, `recording_of`, or one made by `record`)."""

    tokens: list[str]
    spill: QKSpill


def plan_record(model: LoadedModel, text: str, max_tokens: int | None = None) -> Plan[Recording]:
    """`record` planned (`budget.plan`): the text read once, its need one forward with fused attention where the model
    runs (each layer's queries, keys, values and input go to a file as they arrive on a CPU, or stay in the GPU's
    free memory, `scan.rows.device_room`). Raises as `record` does, before anything runs."""
    if not model.can_recompute:
        raise ValueError(f"The attention of '{model.name}' cannot be recomputed step by step: "
                         f"{model.stand_in or model.unread}")
    toks = tokenize(model, text, max_tokens)
    return Plan(toks.n, forward(model, toks.n), lambda: Recording(toks.display, lean_layers(model, toks.ids)))


def record(model: LoadedModel, text: str, max_tokens: int | None = None) -> Recording:
    """Run `text` (its first `max_tokens` tokens, default the model's limit) through `model` once. Raises
    InputError for blank text and ValueError when the architecture's weights cannot be read."""
    return plan_record(model, text, max_tokens).run()


def recording_of(run) -> Recording | None:
    """A long run's own recording: its scan kept each layer's queries, keys, values and input as it ran (no
    second pass), for every token, hidden or not. None for a run that holds its probabilities (`record`)."""
    source = getattr(getattr(run, "summary", None), "row_source", None)
    if source is None:
        return None
    return Recording(list(run.tokens), source.spilled())


def window(total: int, start: int, size: int = TEACH_TOKENS) -> tuple[int, int]:
    """(start, stop) of a window of `size` tokens that starts at `start`, moved inside the text's `total`."""
    start = max(0, min(int(start), total - size))
    return start, min(total, start + size)


def _layer(model: LoadedModel, rec: Recording, layer: int, names=("q", "k", "v", "x")):
    """(row, our MHA, and the parts `names` of a layer (the model's number) from a recording: only those are read."""
    row = model.layer_ids.index(layer)  # `layer` is the model's number (a hybrid's softmax layers differ)
    parts = [rec.spill.part(row, name, model.device) for name in names]
    return (row, model.layer_adapter(row).mha, *parts)


def _head_steps(model: LoadedModel, mha, q: torch.Tensor, k: torch.Tensor, head: int, first: int):
    """One head's rows for queries q (b, d_k) at positions first … first + b − 1 against every key k (N, d_k):
    (scores, scaled, masked, probabilities float32), each (b, N)."""
    b, N = q.shape[0], k.shape[0]
    scores = q @ k.T
    scaled = mha.scores(q[None, None], k[None, None])[0, 0]  # × scale (soft-capped when the head is)
    hidden = hidden_keys(b, N, scaled.device, causal=model.is_causal, window=mha.window, chunk=mha.chunk,
                         first=first)
    masked = scaled if hidden is None else scaled.masked_fill(hidden, float("-inf"))
    # GPT-OSS: the sink's column joins the softmax and is dropped: each row's missing mass is the sink's share
    full = masked if mha.sinks is None else torch.cat(
        (masked, sink_column(mha.sinks, masked[None, None], [head])[0, 0]), -1)
    return scores, scaled, masked, torch.softmax(full, dim=-1, dtype=torch.float32)[:, :N]


def layer_probabilities(model: LoadedModel, recording: Recording, layer: int, start: int = 0,
                        size: int = TEACH_TOKENS) -> np.ndarray:
    """Every head's attention probabilities (H, n, n) of one layer (the model's number) over the window
    `window(total, start, size)` of the recording's tokens: its queries against its keys (exact; a row's keys
    outside the window take the rest of its mass)."""
    start, stop = window(len(recording.tokens), start, size)
    _row, mha, q_all, k_all = _layer(model, recording, layer, ("q", "k"))  # no values, no input
    with model.lock, torch.inference_mode():
        kv = [kv_head(h, model.num_heads, model.num_kv_heads) for h in range(model.num_heads)]
        rows = [_head_steps(model, mha, q_all[0, h, start:stop], k_all[0, kv[h]], h, start)[3][:, start:stop]
                for h in range(model.num_heads)]
    return torch.stack(rows).float().cpu().numpy()


def _fold(a: torch.Tensor, outside: torch.Tensor) -> np.ndarray:
    """log Σ e^a over the columns `outside` of each row (−inf where all are −inf)."""
    return torch.logsumexp(a[:, outside].double(), dim=-1).cpu().numpy()


def walkthrough(model: LoadedModel, text: str, layer: int, head: int, max_tokens: int | None = None, *,
                recording: Recording | None = None, start: int = 0, size: int = TEACH_TOKENS) -> Walkthrough:
    """One head of one layer, step by step (see the module doc), over the window of `size` tokens from `start`
    (`window`), from `recording` (that of `record(model, text, max_tokens)`; made here when not given). Raises
    InputError for blank text and ValueError when the architecture's weights cannot be read."""
    rec = recording if recording is not None else record(model, text, max_tokens)
    total = len(rec.tokens)
    start, stop = window(total, start, size)
    row, mha, q_all, k_all, v_all, x_all = _layer(model, rec, layer)
    kv = kv_head(head, model.num_heads, model.num_kv_heads)
    with model.lock, torch.inference_mode():
        steps, zs = None, []
        for h in range(model.num_heads):  # every head's z of the window: the concatenation and the output
            g = kv_head(h, model.num_heads, model.num_kv_heads)
            made = _head_steps(model, mha, q_all[0, h, start:stop], k_all[0, g], h, start)
            zs.append(made[3].to(v_all.dtype) @ v_all[0, g])  # (n, d_v) over every key
            steps = made if h == head else steps
        scores, scaled, masked, probs = steps
        z = zs[head]
        concat = torch.cat(zs, -1)  # (n, H · d_v)
        output = mha.w_o(concat)  # (n, d_model)
        weights = mha.head_weights()
        w_o = weights["W_O"][head]  # (d_v, d_model)
        head_output = z @ w_o
        outside = torch.ones(total, dtype=torch.bool, device=scores.device)
        outside[start:None if model.is_causal else stop] = False  # a decoder's later keys are always hidden
        folded = ([_fold(a, outside) for a in (scores, scaled, masked)] + [probs[:, outside].sum(-1).cpu().numpy()]
                  if bool(outside.any()) else [None] * 4)

    def np32(t: torch.Tensor) -> np.ndarray:
        return t.detach().float().cpu().numpy()
    inside = slice(start, stop)
    return Walkthrough(
        tokens=rec.tokens[inside], layer=layer, head=head, kv_head=kv, num_heads=model.num_heads,
        num_kv_heads=model.num_kv_heads, scale=float(mha.scale), is_causal=model.is_causal,
        rope=mha.rope is not None and row in rec.spill.rotated, X=np32(x_all[0, inside]),
        W_Q=np32(weights["W_Q"][head]), W_K=np32(weights["W_K"][kv]), W_V=np32(weights["W_V"][kv]), W_O=np32(w_o),
        Q=np32(q_all[0, head, inside]), K=np32(k_all[0, kv, inside]), V=np32(v_all[0, kv, inside]),
        scores=np32(scores[:, inside]), scaled=np32(scaled[:, inside]), masked=np32(masked[:, inside]),
        probs=np32(probs[:, inside]), z=np32(z), concat=np32(concat), output=np32(output),
        head_output=np32(head_output), softcap=mha.softcap, window=mha.window,
        q_norm=mha.q_norm is not None, qkv_bias=any(p.bias is not None for p in (mha.w_q, mha.w_k, mha.w_v)),
        out_bias=mha.w_o.bias is not None, sink=None if mha.sinks is None else float(mha.sinks[head]),
        start=start, total=total, outside=int(outside.sum()), outside_scores=folded[0], outside_scaled=folded[1],
        outside_masked=folded[2], outside_probs=folded[3],
    )


@dataclass(frozen=True)
class Cost:
    """Multiply–adds and stored floats of one attention layer (`docs/head-metrics.md`, section 5)."""

    name: str
    kv_heads: int
    projections: int  # d_model · (H·n·d_k + G·m·d_k + G·m·d_v)
    scores: int  # H · n · m · d_k
    weighted_sum: int  # H · n · m · d_v
    output: int  # H · n · d_v · d_model
    q: int  # H · n · d_k
    kv: int  # G · m · (d_k + d_v): the KV cache of one layer
    probabilities: int  # H · n · m (fused kernels never store it)
    z: int  # H · n · d_v

    @property
    def multiply_adds(self) -> int:
        return self.projections + self.scores + self.weighted_sum + self.output

    @property
    def floats(self) -> int:
        return self.q + self.kv + self.probabilities + self.z


def cost(n: int, m: int, d_model: int, H: int, G: int, d_k: int, d_v: int, name: str = "") -> Cost:
    """One layer, n queries and m keys, H query heads sharing G key/value heads."""
    return Cost(
        name=name or f"G = {G}", kv_heads=G,
        projections=d_model * (H * n * d_k + G * m * d_k + G * m * d_v),
        scores=H * n * m * d_k, weighted_sum=H * n * m * d_v, output=H * n * d_v * d_model,
        q=H * n * d_k, kv=G * m * (d_k + d_v), probabilities=H * n * m, z=H * n * d_v,
    )


def costs(model: LoadedModel, n: int) -> list[Cost]:
    """Self-attention (m = n) of one layer of this model's shape as MHA (G = H), the model's
    own grouping when it is GQA (else G = H / 4 as an example), and MQA (G = 1)."""
    H, d = model.num_heads, model.d_model
    d_k = d_v = model.d_k
    middle = model.num_kv_heads if 1 < model.num_kv_heads < H else max(1, H // 4)
    label = "GQA (this model)" if 1 < model.num_kv_heads < H else f"GQA (G = {middle}, an example)"
    return [cost(n, n, d, H, H, d_k, d_v, "MHA" + (" (this model)" if model.num_kv_heads == H else "")),
            cost(n, n, d, H, middle, d_k, d_v, label),
            cost(n, n, d, H, 1, d_k, d_v, "MQA" + (" (this model)" if model.num_kv_heads == 1 else ""))]


def self_similarity(x: np.ndarray, normalise: bool) -> np.ndarray:
    """softmax(X Xᵀ / √d) with Q = K = V = X (no projections), rows of X normalised or not. Normalised, every
    row is √d long, the size the 1/√d is made for (entries of unit variance, as a layer norm leaves them), and
    every token attends most to itself (x·x = d ≥ x·y), clearly: the diagonal's score √d above a row whose cosine
    is 0. Rows of length 1 would score at most 1/√d (0.05 for d = 384) and leave a uniform, pale map. Raw, a
    longer vector pointing the same way can win."""
    x = np.asarray(x, dtype=np.float64)
    if normalise:
        x = np.sqrt(x.shape[1]) * x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return softmax_rows(x @ x.T / np.sqrt(x.shape[1]))


def softmax_rows(scores: np.ndarray, causal: bool = False) -> np.ndarray:
    """Softmax of each row of a square score matrix, with the causal mask (j > i hidden) if
    asked: the encoder and the decoder view of the same scores."""
    s = np.asarray(scores, dtype=np.float64)
    if causal:
        s = np.where(np.triu(np.ones(s.shape, dtype=bool), 1), -np.inf, s)
    e = np.exp(s - s.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def longer_neighbour_example() -> tuple[list[str], np.ndarray]:
    """Three 2-d vectors where, without normalisation, token "b" attends more to "c" (same
    direction, three times longer) than to itself."""
    return ["a", "b", "c"], np.array([[1.0, 0.0], [0.6, 0.8], [1.8, 2.4]])
