"""Whether a model's weights were changed in place since something was computed from them.

A notebook zeroes a head (`weight[:, 64:128] = 0` under `torch.no_grad()`), scales a projection or loads other
weights into the same parameters (`load_state_dict`), then asks again for what depends on the weights alone: the
per-head matrices, an adapter's copy of a fused projection's rows, composition scores, the hash their copy on disk is
named by. Each is kept while the model lives; each is kept with the weights' `version` it was computed at and
computed again when that has moved.

PyTorch counts every change made in place to a tensor (its version counter: `copy_`, `mul_`, an indexed assignment,
`load_state_dict`); a parameter replaced by another (`module.weight = Parameter(...)`) is another tensor, and one
given other memory (`weight.data = ...`, a move to another device or precision) reads elsewhere: both count too.
A tensor made in inference mode has no counter (nothing outside inference mode can change it). A weight that
accelerate keeps off its device (a `meta` parameter, its values on disk or in the CPU's memory) counts by its shape
alone: accelerate gives the module a new parameter around every forward, which changes no weight.
"""

from __future__ import annotations

from typing import Iterable

import torch


def version(module: torch.nn.Module) -> tuple:
    """What changes whenever a parameter of `module` (and of every module under it) is changed in place or replaced
    (`of`). About 2 µs a parameter, most of it walking the modules (SmolLM2's 272: 0.6 ms)."""
    return of(module.parameters())


def of(tensors: Iterable[torch.Tensor]) -> tuple:
    """Each of `tensors`' identity, memory and version counter, in order (an offloaded one's shape: the module's
    docstring)."""
    return tuple(tuple(t.shape) if t.is_meta else (id(t), t.data_ptr(), None if t.is_inference() else t._version)
                 for t in tensors)
