"""Capture every head's attention for one text: the `AttentionRun` that every view reads.

`analyze` tokenizes, truncates to the model's limit (saying so), runs the model once and
stacks the per-layer probabilities into one float32 array `(layers, heads, n, n)`, indexed
`[layer, head, query, key]`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

import models
from models import LoadedModel

from .tokens import clean_tokens


def tensor_view(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing the array's memory, without PyTorch's warning for read-only arrays (the
    app's cached runs are read-only; callers only read through the view)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "the given NumPy array is not writable"
        return torch.from_numpy(array)


class InputError(ValueError):
    """The text cannot be analysed; the message is written for the person who typed it."""


@dataclass
class AttentionRun:
    """Attention probabilities of every head for one input, with its tokens.

    attentions: float32 (layers, heads, n, n); row i is query token i, column j key token j;
    rows sum to 1 and, for causal models, entries above the diagonal are exactly 0.
    """

    tokens: list[str]
    attentions: np.ndarray
    is_causal: bool = False
    num_kv_heads: int = 0  # 0 means "as many as heads" and is replaced in __post_init__
    model_name: str = "array"
    token_ids: list[int] = field(default_factory=list)
    raw_tokens: list[str] = field(default_factory=list)
    special_mask: list[bool] = field(default_factory=list)
    word_ids: list[int] = field(default_factory=list)
    text: str = ""
    num_input_tokens: int = 0  # tokens in the whole text, before truncation
    # float32 (layers, heads, n, d_v): each head's output z = A @ V before W_O; None when the
    # architecture does not expose it (the output-based metrics then say so)
    head_outputs: np.ndarray | None = None
    # the model's layer number of each row of `attentions` (a capture of some layers only,
    # `analyze(layers=...)`), and how many layers the model has; default: every layer
    layer_ids: list[int] = field(default_factory=list)
    model_layers: int = 0

    def __post_init__(self) -> None:
        n = len(self.tokens)
        self.num_kv_heads = self.num_kv_heads or self.num_heads
        self.raw_tokens = self.raw_tokens or list(self.tokens)
        self.special_mask = self.special_mask or [False] * n
        self.word_ids = self.word_ids or list(range(n))
        self.num_input_tokens = self.num_input_tokens or n
        self.layer_ids = [int(l) for l in self.layer_ids] or list(range(self.num_layers))
        self.model_layers = self.model_layers or self.num_layers
        if len(self.layer_ids) != self.num_layers:
            raise ValueError(f"{len(self.layer_ids)} layer ids for {self.num_layers} captured layers")

    @property
    def partial(self) -> bool:
        """Whether only some of the model's layers were captured."""
        return self.num_layers < self.model_layers

    @property
    def from_first_layer(self) -> bool:
        """Whether the rows are the model's layers 0, 1, …, in order (what rollout and flow need)."""
        return self.layer_ids == list(range(self.num_layers))

    @property
    def num_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def num_heads(self) -> int:
        return self.attentions.shape[1]

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def truncated(self) -> bool:
        return self.num_input_tokens > self.n

    def head(self, layer: int, head: int) -> np.ndarray:
        """(n, n) probabilities of one head."""
        return self.attentions[layer, head]

    @classmethod
    def from_array(
        cls,
        attentions,
        tokens: list[str],
        is_causal: bool = False,
        *,
        num_kv_heads: int | None = None,
        model_name: str = "array",
        atol: float = 1e-4,
    ) -> "AttentionRun":
        """A run from any (layers, heads, n, n) array of row-stochastic matrices.

        Raises ValueError with what is wrong: shape, token count, negative entries, rows that
        do not sum to 1, or non-zero entries above the diagonal of a causal run.
        """
        a = np.asarray(attentions, dtype=np.float32)
        if a.ndim == 3:
            a = a[None]  # one layer
        if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"attentions must have shape (layers, heads, n, n); got {a.shape}")
        if a.shape[-1] != len(tokens):
            raise ValueError(f"{len(tokens)} tokens for attention over {a.shape[-1]} positions")
        if not np.isfinite(a).all() or (a < 0).any():
            raise ValueError("attentions must be finite and non-negative")
        sums = a.sum(-1)
        if np.abs(sums - 1).max() > atol:
            raise ValueError(f"every row must sum to 1; the worst sums to {sums.flat[np.abs(sums - 1).argmax()]:.4f}")
        if is_causal and np.triu(a, 1).any():
            raise ValueError("a causal run must have zeros above the diagonal")
        kv = num_kv_heads or a.shape[1]
        if a.shape[1] % kv:
            raise ValueError(f"num_kv_heads ({kv}) must divide the number of heads ({a.shape[1]})")
        return cls(tokens=list(tokens), attentions=a, is_causal=is_causal, num_kv_heads=kv,
                   model_name=model_name)


LEAN_ABOVE_BYTES = 2**30  # SmolLM2 at 2,048 tokens: 4.5 GB once instead of 9 GB at the peak


def load_model(name: str, device: str = "auto", local_attention: bool = False, *, progress=None) -> LoadedModel:
    """Load a registry name ('minilm', 'smollm2'), hub id or folder; see `models.load`."""
    return models.load(name, device=device, local_attention=local_attention, progress=progress)


def token_limit(model: LoadedModel, max_tokens: int | None = None) -> int:
    """The most tokens one analysis of this model takes: its positions, or a smaller cap."""
    return min(model.max_positions, max_tokens) if max_tokens else model.max_positions


def analyze(model: LoadedModel, text: str, *, max_tokens: int | None = None,
            lean: bool | None = None, layers: list[int] | None = None) -> AttentionRun:
    """Run `text` through `model` and capture the attention of every head.

    Texts longer than the model's limit (or `max_tokens`) are truncated; the run records how
    many tokens the whole text had (`num_input_tokens`). Raises InputError for blank text.
    lean (default: when the probabilities take more than LEAN_ABOVE_BYTES): run the model
    with fused attention and recompute each layer's probabilities into the run's array, so
    one float32 copy exists instead of two (Hugging Face's tuple and the stacked array);
    equal to eager capture within 1e-5 (tests/test_lean.py).
    layers: capture only these layers (model layer numbers); the run's `layer_ids` says which
    row is which layer. Holds len(layers) / num_layers of the memory of a full capture.
    """
    ids, full, tokens = _tokens(model, text, token_limit(model, max_tokens))
    chosen = list(range(model.num_layers)) if layers is None else sorted({int(l) for l in layers})
    if not chosen or chosen[0] < 0 or chosen[-1] >= model.num_layers:
        raise InputError(f"Choose layers between 0 and {model.num_layers - 1} to capture.")
    if lean is None:  # measured: lean is 5-40 % slower for a full capture, but holds half the memory
        lean = model.has_head_outputs and (
            len(chosen) < model.num_layers
            or len(chosen) * model.num_heads * len(ids) ** 2 * 4 > LEAN_ABOVE_BYTES)
    stacked = None
    if lean:  # fused forward, then each layer's probabilities straight into one array
        try:
            cap = model.capture(torch.tensor([ids]), lean=True)
            stacked = np.empty((len(chosen), model.num_heads, len(ids), len(ids)), dtype=np.float32)
            for row, layer in enumerate(chosen):
                stacked[row] = model.recompute(cap, layer)[0].float().cpu().numpy()
        except (RuntimeError, ValueError, KeyError):  # a layout lean capture cannot follow: go eager
            stacked = None
    if stacked is None:
        cap = model.capture(torch.tensor([ids]))
        stacked = torch.stack([cap.attentions[l][0] for l in chosen]).float().cpu().numpy()  # (L, H, n, n)
    outputs = None
    if cap.head_outputs is not None:
        outputs = torch.stack([cap.head_outputs[l][0] for l in chosen]).float().cpu().numpy()  # (L, H, n, d_v)
    display, word_ids, raw, special = tokens
    return AttentionRun(
        tokens=display, attentions=stacked, is_causal=model.is_causal,
        num_kv_heads=model.num_kv_heads, model_name=model.name, token_ids=list(ids),
        raw_tokens=list(raw), special_mask=special, word_ids=word_ids, text=text,
        num_input_tokens=full, head_outputs=outputs, layer_ids=chosen, model_layers=model.num_layers,
    )


def _tokens(model: LoadedModel, text: str, limit: int):
    """Token ids of `text` (truncated to `limit`), the untruncated count, and
    (display tokens, word ids, raw pieces, special mask). Raises InputError for blank text."""
    if text is None or not text.strip():
        raise InputError("Type a sentence to see its attention.")
    tokenizer = model.tokenizer
    full = tokenizer(text, add_special_tokens=True)["input_ids"]
    ids = full
    if len(full) > limit:
        ids = tokenizer(text, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"]
    if not ids:
        raise InputError("The text produced no tokens for this model; type some words.")
    # [CLS], [SEP], BOS, EOS, padding; an unknown-character token is text, not structure
    structural = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    special = [i in structural for i in ids]
    raw = tokenizer.convert_ids_to_tokens(ids)
    display, word_ids = clean_tokens(tokenizer, raw, special)
    return ids, len(full), (display, word_ids, raw, special)


@dataclass
class Overview:
    """Every head of a long text as thumbnails, computed one head at a time (`overview`).

    pooled: float32 (layers, heads, s, s), each head max-pooled to at most s × s cells.
    """

    tokens: list[str]
    pooled: np.ndarray
    model_name: str
    num_input_tokens: int

    @property
    def n(self) -> int:
        return len(self.tokens)


def overview(model: LoadedModel, text: str, *, thumb: int = 48, progress=None) -> Overview:
    """Thumbnails of every head for `text` up to the model's whole context (`max_positions`).

    The model runs once with fused attention (lean capture); then each head's probabilities
    are recomputed, pooled to `thumb` × `thumb` and dropped, so at most one head's n × n
    matrix exists at a time. `progress(fraction, message)` is called after each layer.
    """
    from .detail import max_pool

    ids, full, (display, _, _, _) = _tokens(model, text, model.max_positions)
    progress = progress or (lambda _f, _m: None)
    progress(0.0, f"Running {model.name} on {len(ids)} tokens with fused attention…")
    cap = model.capture(torch.tensor([ids]), lean=True, head_outputs=False)
    s = min(thumb, len(ids))
    pooled = np.empty((model.num_layers, model.num_heads, s, s), dtype=np.float32)
    for layer in range(model.num_layers):
        for head, probs in model.each_head(cap, layer):
            pooled[layer, head] = max_pool(probs[0].float().cpu().numpy(), thumb)
        progress((layer + 1) / model.num_layers, f"Layer {layer + 1} of {model.num_layers} done")
    return Overview(tokens=display, pooled=pooled, model_name=model.name, num_input_tokens=full)
