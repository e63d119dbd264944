"""Capture every head's attention for one text: the `AttentionRun` that every view reads.

`capture_text` (what `mha_viz.analyze` does for an encoder or a decoder) tokenizes, truncates to
the model's limit (saying so), runs the model once and stacks the per-layer probabilities into
one float32 array `(layers, heads, n, n)`, indexed `[layer, head, query, key]`, each layer
checked for NaN and infinity (`mha_viz.capture.finite`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import mha_viz_models
from mha_viz.budget.memory import chooses_lean
from mha_viz.capture import head_rows, memory_columns, run_file
from mha_viz.capture.finite import FiniteCheck
from mha_viz.capture.own_outputs import OwnOutputs, own_outputs
from mha_viz.capture.sinks import Hidden, drop_tokens
from mha_viz.capture.transfer import HostCopier, to_host
from mha_viz.text.tokenize import InputError, tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.reading import values


class HeadArray:
    """What every capture of heads has: `attentions`, (layers, heads, queries, keys)."""

    attentions: np.ndarray
    # "" when `attentions` are the weights; else what they hold instead, as a figure titles it
    # (the sidebar's lens: `mha_viz.interventions.attribution.as_contributions`)
    lens = ""

    @property
    def num_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def num_heads(self) -> int:
        return self.attentions.shape[1]

    def head(self, layer: int, head: int) -> np.ndarray:
        """(queries, keys) probabilities of one head."""
        return self.attentions[layer, head]


@dataclass(eq=False, repr=False)  # arrays: compared by identity
class AttentionRun(HeadArray):
    """Attention probabilities of every head for one input, with its tokens.

    attentions: float32 (layers, heads, n, n); row i is query token i, column j key token j;
    rows sum to 1 and, for causal models, entries above the diagonal are exactly 0. A long run
    (`analyze` above MHA_VIZ_DENSE_MB: `is_dense` False) holds no such array: it keeps the scan's
    summaries (`summary`: the head table, thumbnails, each row's heaviest keys) and each layer's
    input, and recomputes the rows a view asks for (`rows`, `column`, `pooled_head`, `head`);
    `attentions` then builds every head, admitted by its bytes (`head_rows.check_dense`).
    """

    tokens: list[str]
    attentions: np.ndarray  # a property below: the dense array, held or built when asked for
    is_causal: bool = False
    num_kv_heads: int = 0  # 0 means "as many as heads" and is replaced in __post_init__
    model_name: str = "array"
    token_ids: list[int] = field(default_factory=list)
    raw_tokens: list[str] = field(default_factory=list)
    special_mask: list[bool] = field(default_factory=list)
    word_ids: list[int] = field(default_factory=list)
    text: str = ""
    num_input_tokens: int = 0  # tokens in the whole text, before truncation
    num_input_tokens_is_estimate: bool = False  # a long text's total, estimated from the part read
    # float32 (layers, heads, n, d_v): each head's output z = A @ V before W_O; None when the
    # architecture does not expose it (the output-based metrics then say so)
    head_outputs: np.ndarray | None = None
    # the model's layer number of each row of `attentions` (a capture of some layers only,
    # `analyze(layers=...)`), and how many layers the model has; default: every layer
    layer_ids: list[int] = field(default_factory=list)
    model_layers: int = 0
    # set by `drop_tokens`: what was hidden, the sink mass per head, rows left empty, the label
    hidden: Hidden | None = None
    # float32 (layers, heads, n): ‖f_h(x_j)‖, the norm of what key j writes through head h
    # (`mha_viz_models.reading.values`); None where the value path cannot be read (`mha_viz.interventions.attribution`)
    value_norms: np.ndarray | None = None
    lens: str = ""  # see HeadArray.lens
    # what the model computed in ("float32", "bfloat16", "float16"; "" when not known: an array,
    # an old run file); the probabilities themselves are float32 whatever it is
    precision: str = ""
    # a long run's rows, (layer, head, start, stop) -> blocks (`head_rows.Blocks`), and its shape
    # (layers, heads); None for a dense run, whose rows are its array's
    source: head_rows.Blocks | None = None
    shape: tuple[int, int] = (0, 0)
    summary: Any = None  # a long run's `mha_viz.Scan`: head table, thumbnails (`pooled`), kept keys
    own: OwnOutputs | None = None  # the model's loss, last prediction or embedding, where its capture made them
    # the compressed layers' memory entries beside the tokens (DeepSeek-V4: `memory_columns.Memory`), None for others
    memory: memory_columns.Memory | None = None
    # {model layer number: its key/value heads} where the layers differ (Gemma 4's global layers); {}: num_kv_heads
    layer_kv_heads: dict[int, int] = field(default_factory=dict)

    @property
    def attentions(self) -> np.ndarray:
        if self._dense is None:  # a long run: every head built once, admitted by its bytes
            head_rows.check_dense(self.num_layers, self.num_heads, self.n, self.model_name)
            built = np.empty((self.num_layers, self.num_heads, self.n, self.n), dtype=np.float32)
            for layer in range(self.num_layers):  # one projection of each layer's input
                built[layer] = self.layer_rows(layer)
            built.setflags(write=False)
            self._dense = built
        return self._dense

    @attentions.setter
    def attentions(self, value) -> None:
        self._dense = None if isinstance(value, property) else value  # a property: none given

    @property
    def spans(self) -> head_rows.Spans:
        """The rows of `source` as computed, each block over only the keys it may see (`head_rows.spans_of`)."""
        return head_rows.spans_of(self.source)

    @property
    def is_dense(self) -> bool:
        """Whether every head's array is held (a long run holds it only once asked for)."""
        return self._dense is not None

    @property
    def num_layers(self) -> int:
        return self._dense.shape[0] if self._dense is not None else self.shape[0]

    @property
    def num_heads(self) -> int:
        return self._dense.shape[1] if self._dense is not None else self.shape[1]

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if self._dense is None and self.source is None:
            raise ValueError("a run needs its attentions, or (for a long run) a source of rows")
        if self._dense is not None:
            self.source = head_rows.dense_blocks(self._dense)
        self.num_kv_heads = self.num_kv_heads or self.num_heads
        self.raw_tokens = self.raw_tokens or list(self.tokens)
        self.special_mask = self.special_mask or [False] * n
        self.word_ids = self.word_ids or list(range(n))
        self.num_input_tokens = self.num_input_tokens or n
        self.layer_ids = [int(layer) for layer in self.layer_ids] or list(range(self.num_layers))
        self.model_layers = self.model_layers or self.num_layers
        if len(self.layer_ids) != self.num_layers:
            raise ValueError(f"{len(self.layer_ids)} layer ids for {self.num_layers} captured layers")

    def __repr__(self) -> str:
        kind = "dense" if self.is_dense else "long"
        return (f"AttentionRun({self.model_name!r}, {self.n} tokens, {self.num_layers} layers × "
                f"{self.num_heads} heads, {kind})")

    def _check(self, layer: int, head: int) -> None:
        if not (0 <= layer < self.num_layers and 0 <= head < self.num_heads):
            raise IndexError(f"no head ({layer}, {head}): this run has {self.num_layers} layers (rows 0 … "
                             f"{self.num_layers - 1}) × {self.num_heads} heads")

    def _rows_in(self, layer: int, head: int, start: int, stop: int | None) -> int:
        """The end of query rows start … stop − 1 of head (layer, head) (None: the last row), checked."""
        self._check(layer, head)
        stop = self.n if stop is None else stop
        if not 0 <= start < stop <= self.n:
            raise IndexError(f"rows {start} … {stop - 1} are not within the text's {self.n} tokens")
        return stop

    def rows(self, layer: int, head: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """float32 (stop − start, n): the exact probabilities of query rows start … stop − 1 (default
        every row) of one head (`layer` is the run's row, as in `attentions[layer, head]`); a dense
        run's are a view of its array, a long run's recomputed."""
        stop = self._rows_in(layer, head, start, stop)
        if self._dense is not None:
            return self._dense[layer, head, start:stop]
        return head_rows.gather(self.source, layer, [head], start, stop, self.n, self.num_heads)[0]

    def layer_rows(self, layer: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """float32 (heads, stop − start, n): rows start … stop − 1 of every head of one layer (a long run's
        from one projection of the layer's input: cheaper than each head's `rows` in turn)."""
        stop = self._rows_in(layer, 0, start, stop)
        if self._dense is not None:
            return self._dense[layer, :, start:stop]
        return head_rows.gather(self.source, layer, None, start, stop, self.n, self.num_heads)

    def outputs(self, layer: int, head: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """float32 (stop − start, d_v): one head's output z (probabilities × values, before W_O) at query rows
        start … stop − 1; a dense run's from `head_outputs`, a long run's recomputed from its scan's spilled
        queries, keys and values. Raises ValueError where the run has none."""
        stop = self._rows_in(layer, head, start, stop)
        if self.head_outputs is not None:
            return self.head_outputs[layer, head, start:stop]
        source = getattr(self.summary, "row_source", None)
        if self._dense is not None or source is None or not hasattr(source, "outputs"):
            raise ValueError("this run holds no head outputs (the model's are not read, or it was saved without)")
        return source.outputs(layer, head, start, stop)

    def head(self, layer: int, head: int) -> np.ndarray:
        """(queries, keys) probabilities of one head (a long run's recomputed: n² floats)."""
        return self.rows(layer, head)

    def column(self, layer: int, head: int, key: int) -> np.ndarray:
        """float32 (n,): the weight every query gives to `key`, streamed a block of rows at a time."""
        self._check(layer, head)
        if self._dense is not None:
            return self._dense[layer, head, :, key]
        return head_rows.column(self.spans, layer, head, key, self.n, causal=self.is_causal)

    def pooled_head(self, layer: int, head: int, edges) -> tuple[np.ndarray, np.ndarray]:
        """(block max, block mean) of one head over the query and key blocks that `edges` bound
        (`views.detail.block_edges`), streamed a block of rows at a time."""
        self._check(layer, head)
        return head_rows.pooled_head(self.spans, layer, head, edges, causal=self.is_causal)

    def kv_heads(self, layer: int) -> int:
        """How many key/value heads the run's layer `layer` (its row) shares among its query heads."""
        return self.layer_kv_heads.get(self.layer_ids[layer], self.num_kv_heads)

    @property
    def partial(self) -> bool:
        """Whether only some of the model's layers were captured."""
        return self.num_layers < self.model_layers

    @property
    def from_first_layer(self) -> bool:
        """Whether the rows are the model's layers 0, 1, …, in order (what rollout and flow need)."""
        return self.layer_ids == list(range(self.num_layers))

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def truncated(self) -> bool:
        return self.num_input_tokens > self.n

    def drop_tokens(self, mask) -> "AttentionRun":
        """This run without the tokens where `mask` is True (both axes), each row renormalised
        over the kept keys; see `mha_viz.capture.sinks.drop_tokens`."""
        return drop_tokens(self, mask)

    def save(self, path, *, float16: bool = False) -> None:
        """Write this run, as shown, to an `.npz` file (a path or a binary file object); float16
        halves the size. What `drop_tokens` hid is not restorable; see `mha_viz.capture.run_file`."""
        run_file.write(path, self, float16=float16)

    @classmethod
    def load(cls, path, *, max_bytes: int | None = None) -> "AttentionRun":
        """A run saved by `save` (path, binary file object or bytes), arrays in float32; never
        unpickles. Raises ValueError for a file that is not a run file."""
        return cls(**run_file.read(path, max_bytes=max_bytes))

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


def capture_text(model: LoadedModel, text: str, *, max_tokens: int | None = None,
                 lean: bool | None = None, layers: list[int] | None = None) -> AttentionRun:
    """Run `text` through `model` (an encoder or a decoder) and capture the attention of every head.

    Texts longer than the model's limit (or `max_tokens`) are truncated; the run records how
    many tokens the whole text had (`num_input_tokens`). Raises InputError for blank text, and
    NotFiniteError (an InputError) when a layer's probabilities hold NaN or infinity.
    lean (default: when the probabilities take more than LEAN_ABOVE_BYTES): run the model
    with fused attention and recompute each layer's probabilities into the run's array, so
    one float32 copy exists instead of two (Hugging Face's tuple and the stacked array) and a
    GPU holds a few layers' at a time (`budget.memory.IN_FLIGHT`); equal to eager capture within 1e-5
    (tests/models/test_lean.py). From a GPU every layer goes to the host through pinned
    buffers while the next one computes (`mha_viz.capture.transfer`).
    Whatever the model computes in, the probabilities are float32 rows that sum to 1.
    layers: capture only these layers (model layer numbers); the run's `layer_ids` says which
    row is which layer. Holds len(layers) / num_layers of the memory of a full capture. A hybrid
    (Qwen3-Next…) is captured on its softmax-attention layers, its `layer_ids` their numbers.
    """
    toks = tokenize(model, text, max_tokens)
    ids = toks.ids
    numbers = model.layer_ids  # the model's number of each attention layer (a hybrid's softmax layers)
    wanted = numbers if layers is None else sorted({int(layer) for layer in layers})
    if not wanted or any(layer not in numbers for layer in wanted):
        among = (f"among its softmax-attention layers {', '.join(map(str, numbers))}" if model.layer_numbers
                 else f"between 0 and {model.num_layers - 1}")
        raise InputError(f"Choose layers {among} to capture.")
    chosen = [numbers.index(layer) for layer in wanted]  # positions among the attention layers
    if lean is None:
        lean = chooses_lean(model, len(ids), len(chosen))
    stacked = np.empty((len(chosen), model.num_heads, len(ids), len(ids)), dtype=np.float32)  # (L, H, n, n)
    cap = None
    check = FiniteCheck(model)  # one sum a layer, on its device, before it leaves
    if lean:  # fused forward, then each layer's probabilities straight into one array
        try:
            cap = model.capture(torch.tensor([ids]), lean=True)
            with HostCopier(stacked) as copier:
                for row, layer in enumerate(chosen):
                    copier.put(row, check.see(model.recompute(cap, layer)[0], f"attention in layer {wanted[row]}"))
        except torch.OutOfMemoryError:
            raise
        except (RuntimeError, ValueError, KeyError):  # a layout lean capture cannot follow: go eager
            cap, check = None, FiniteCheck(model)
    if cap is None:
        cap = model.capture(torch.tensor([ids]), inputs=model.has_head_outputs)
        # half precision: widened, rows renormalised
        to_host((check.see(mha_viz_models.as_probabilities(cap.attentions[layer][0]), f"attention in layer {number}")
                 for layer, number in zip(chosen, wanted)), stacked)
    check.verify()
    outputs = None
    if cap.head_outputs is not None:
        outputs = to_host(cap.head_outputs[layer][0] for layer in chosen)  # (L, H, n, d_v): padded by the capture
    norms = None
    if values.can_read_values(model, cap):  # what each key writes through each head: one norm per key
        norms = to_host(values.value_norms(model, cap, layer)[0] for layer in chosen)  # (L, H, n)
    memory = memory_columns.captured(getattr(model.hf_model, "config", None), cap.memory, chosen, wanted, len(ids))
    return AttentionRun(
        tokens=toks.display, attentions=stacked, is_causal=model.is_causal,
        num_kv_heads=model.num_kv_heads, model_name=model.name, token_ids=list(ids),
        raw_tokens=toks.raw, special_mask=toks.special, word_ids=toks.word_ids, text=text,
        num_input_tokens=toks.total, num_input_tokens_is_estimate=toks.total_is_estimate,
        head_outputs=outputs, layer_ids=wanted, model_layers=model.total_layers,
        value_norms=norms, precision=model.precision, memory=memory,
        layer_kv_heads=model.layer_kv_heads,
        # in float32 only, where `ablation_outcome.from_run` reads them: a half-precision model's logits would be
        # widened (n × vocabulary floats) for nothing
        own=own_outputs(cap.output, list(ids), model.is_causal) if model.dtype == torch.float32 else None,
    )
