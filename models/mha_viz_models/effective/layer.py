"""What every kind of effective attention shares: the result of one layer (`EffectiveLayer`), the
taps that read a layer's tensors in the model's own forward (forward hooks on submodules that run
on the CPU path), the short causal convolution the layers apply by calling their weights directly
(`causal_conv`), and the refusal of a layer that cannot be made exact (`NotExact`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from mha_viz_models.errors import ModelLoadError


class NotExact(ModelLoadError):
    """A token-mixing layer whose effective attention cannot be computed exactly: the reason is the message."""


@dataclass(frozen=True)
class EffectiveLayer:
    """One token-mixing layer as output_t = finish_t(Σ_s A[g, t, s] · v_s[g] + skip_t).

    matrix: (groups, n, n) float32, causal (zero above the diagonal); a group is a head, or a block
    of channels (see `grouping`). values: (n, groups, d) float32, the value-like vector `value_name`.
    parts: the named tensors outside the mixing (skip, gate, norm, output projection), each
    described in docs/effective-attention.md; `reconstruct(layer)` of the kind's module uses them.

    A layer read by rows (`each_layer(..., by_rows=True)`, for the kinds whose BY_ROWS is true) has no `matrix`:
    `by_rows()` makes its rows a block at a time, in order, and `blocks()` reads either form."""

    layer: int  # the model's layer number
    module: str  # the module's name in the model
    kind: str  # "mamba2", "gated_deltanet", "kda", "short_conv", "mamba1"
    label: str  # what a person reads: the kind and the structure of its matrix
    structure: str  # "semiseparable", "delta rule", "banded", ...
    grouping: str  # what a row of `matrix` is: "head", "channel", "channel group (mean)"
    folded: str  # what the matrix holds besides the values
    value_name: str
    matrix: np.ndarray | None  # None where the layer is read by rows (`by_rows`)
    values: np.ndarray
    parts: dict[str, np.ndarray] = field(default_factory=dict)
    aggregated: np.ndarray | None = None  # (groups, n, n) when `matrix` is per channel: see `aggregation`
    aggregation: str = ""
    # (first row, (groups, rows, n) float32) for consecutive blocks of rows, from the first: the matrix's rows made
    # a block at a time, each block let go by the caller before the next (a new iterator at each call)
    by_rows: Callable[[], Iterator[tuple[int, np.ndarray]]] | None = None
    # the same blocks as (first row, last row + 1, a call that makes the block over the keys 0 … last row alone: the
    # later ones are 0), each made apart (several threads at once; a view's rows, only the blocks that hold them),
    # where the kind can (Mamba-2's SSD)
    row_jobs: Callable[[], list[tuple[int, int, Callable[[], np.ndarray]]]] | None = None

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    @property
    def shown_groups(self) -> int:
        """How many groups `blocks()` gives: the aggregated ones where the matrix is per channel."""
        return int(self.values.shape[1] if self.aggregated is None else self.aggregated.shape[0])

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """The rows of what the views read (`aggregated` where the matrix is per channel, else `matrix`) as (first
        row, (groups, rows, n)) blocks in order: the layer's own blocks where it is read by rows, else one block."""
        if self.by_rows is not None:
            return self.by_rows()
        return iter([(0, self.matrix if self.aggregated is None else self.aggregated)])

    def mixed(self, matrix: np.ndarray | None = None) -> np.ndarray:
        """Σ_s A[g, t, s] · v_s[g]: (n, groups, d) float32 (float64 accumulation); by blocks of rows where the
        layer is read by rows."""
        v = torch.as_tensor(self.values, dtype=torch.float64)
        if matrix is None and self.matrix is None:
            out = torch.empty(v.shape, dtype=torch.float64)
            for t0, rows in self.by_rows():
                a = torch.as_tensor(rows, dtype=torch.float64)
                out[t0:t0 + a.shape[1]] = torch.einsum("gts,sgd->tgd", a, v)
            return out.float().numpy()
        a = torch.as_tensor(self.matrix if matrix is None else matrix, dtype=torch.float64)
        return torch.einsum("gts,sgd->tgd", a, v).float().numpy()


def layer_number(name: str) -> int:
    """The model's layer number in a module name such as 'model.layers.3.linear_attn' (RWKV: 'rwkv.blocks.3')."""
    found = re.findall(r"(?:layers|blocks)\.(\d+)(?:\.|$)", name)
    if not found:
        raise NotExact(f"Cannot tell which layer '{name}' is: its name holds no 'layers.N' nor 'blocks.N'.")
    return int(found[-1])


class Taps:
    """Forward hooks that keep the first input or the output of named submodules, batch row 0, float32.

    `spec`: {name: (module, "in" | "out" | "args")}; "args" keeps every tensor positional input."""

    def __init__(self, spec: dict[str, tuple[torch.nn.Module, str]]):
        self.spec = spec
        self.got: dict[str, torch.Tensor | list[torch.Tensor]] = {}
        self._handles: list = []

    def __enter__(self) -> Taps:
        for name, (module, where) in self.spec.items():
            self._handles.append(module.register_forward_hook(self._keeper(name, where), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _keeper(self, name: str, where: str):
        def keep(_module, args, kwargs, out):
            if where == "out":
                t = out[0] if isinstance(out, tuple) else out
                self.got[name] = _row0(t)
            else:
                tensors = [a for a in args if isinstance(a, torch.Tensor)]
                tensors += [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
                self.got[name] = _row0(tensors[0]) if where == "in" else [_row0(t) for t in tensors]
        return keep

    def __getitem__(self, name: str):
        if name not in self.got:
            raise NotExact(f"The hook on '{name}' did not fire in the model's forward: this layer's code path "
                           "differs from the one mha-viz reads.")
        return self.got[name]


def _row0(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return (t[0] if t.dim() >= 3 else t).float()


def causal_conv(x: torch.Tensor, conv: torch.nn.Conv1d, activation=None) -> torch.Tensor:
    """The depthwise causal convolution of `x` (n, channels) with `conv`'s weight and bias, as the
    layers apply it (F.conv1d on the weights, padded on the left, cut to n): the module itself never
    runs, so no hook on it fires. `activation`: a callable applied after (SiLU in most layers)."""
    n = x.shape[0]
    w = conv.weight.detach().float()
    b = None if conv.bias is None else conv.bias.detach().float()
    y = F.conv1d(x.t().unsqueeze(0), w, b, padding=w.shape[-1] - 1, groups=x.shape[1])[0, :, :n].t()
    return y if activation is None else activation(y)


def silu_of(module, layer: int):
    """F.silu, the activation after the layers' short convolution; NotExact for another one."""
    if getattr(module, "activation", "silu") not in ("silu", "swish"):
        raise NotExact(f"Layer {layer}: its convolution's activation '{module.activation}' is not SiLU, "
                       "the one mha-viz reproduces.")
    return F.silu


ROW_CELLS = 1 << 24  # cells of one block of rows, all groups together (64 MiB of float32), at least MIN_ROWS rows
MIN_ROWS = 64


def row_step(groups: int, n: int) -> int:
    """How many rows a block of a layer read by rows holds: about ROW_CELLS cells, at least MIN_ROWS rows."""
    return max(MIN_ROWS, ROW_CELLS // max(1, groups * n))


def matrix_fields(whole: Callable[[], torch.Tensor], rows: Callable[[], Iterator[tuple[int, torch.Tensor]]],
                  by_rows: bool, jobs: Callable[[], list[tuple[int, int, Callable[[], torch.Tensor]]]] | None = None
                  ) -> dict:
    """A kind's EffectiveLayer fields for its matrix: the whole `matrix`, or (`by_rows`) no matrix and `by_rows`, the
    blocks of `rows()` made again at each call, and, given `jobs` (the blocks each made apart), `row_jobs`."""
    if not by_rows:
        return {"matrix": as_np(whole())}
    fields = {"matrix": None, "by_rows": lambda: ((first, as_np(block)) for first, block in rows())}
    if jobs is not None:
        fields["row_jobs"] = lambda: [(first, last, partial(_made, make)) for first, last, make in jobs()]
    return fields


def _made(make: Callable[[], torch.Tensor]) -> np.ndarray:
    return as_np(make())


# a kind's blocks of rows each made apart: jobs(rows a block, narrow) -> [(first row, last row + 1, a call that makes
# (groups, b, n) float32, or with narrow (groups, b, last row + 1): over the keys the rows see alone)]
RowJobs = Callable[[int, bool], list[tuple[int, int, Callable[[], torch.Tensor]]]]


def jobs_fields(jobs: RowJobs, groups: int, n: int, by_rows: bool) -> dict:
    """`matrix_fields` of a kind whose blocks of rows are each made apart (`RowJobs`: Mamba-2's SSD, the mLSTM): the
    whole matrix is one block of every row; by rows, blocks of `row_step` rows, in order and each apart."""
    step = row_step(groups, n)
    return matrix_fields(lambda: jobs(n, False)[0][2](),
                         lambda: ((first, make()) for first, _last, make in jobs(step, False)), by_rows,
                         jobs=lambda: jobs(step, True))


def feed(layer, *sinks) -> None:
    """Hand every block of `layer.blocks()` to each sink's `add(first, rows)`, in one pass over the blocks."""
    for first, rows in layer.blocks():
        for sink in sinks:
            sink.add(first, rows)


def as_np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def weight_parts(prefix: str, linear: torch.nn.Linear) -> dict[str, np.ndarray]:
    """A linear layer's weight (and bias) as parts named '<prefix>.weight', '<prefix>.bias'."""
    parts = {f"{prefix}.weight": as_np(linear.weight)}
    if linear.bias is not None:
        parts[f"{prefix}.bias"] = as_np(linear.bias)
    return parts


def linear(x: torch.Tensor, parts: dict, prefix: str) -> torch.Tensor:
    """x through the linear layer kept in `parts` under `prefix` (see weight_parts)."""
    w = torch.as_tensor(parts[f"{prefix}.weight"])
    b = parts.get(f"{prefix}.bias")
    return F.linear(x, w, None if b is None else torch.as_tensor(b))
