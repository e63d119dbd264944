"""Whether a model's weights were changed in place since something was computed from them.

A notebook zeroes a head (`weight[:, 64:128] = 0` under `torch.no_grad()`), scales a projection or loads other
weights into the same parameters (`load_state_dict`), then asks again for what depends on the weights alone: the
per-head matrices, an adapter's copy of a fused projection's rows, composition scores. Each is kept while the model
lives; each is kept with the weights' `version` it was computed at and computed again when that has moved.

PyTorch counts every change made in place to a tensor (its version counter: `copy_`, `mul_`, an indexed assignment,
`load_state_dict`); a parameter replaced by another (`module.weight = Parameter(...)`) is another tensor, and one
given other memory (`weight.data = ...`, a move to another device or precision) reads elsewhere: both count too.
A tensor made in inference mode has no counter (nothing outside inference mode can change it).
"""

from __future__ import annotations

import torch


def version(module: torch.nn.Module) -> tuple:
    """What changes whenever a parameter of `module` (and of every module under it) is changed in place or replaced:
    each parameter's identity, memory and version counter, in order. About 4 µs a parameter (SmolLM2's 272: 1.1 ms)."""
    return tuple((id(p), p.data_ptr(), None if p.is_inference() else p._version) for p in module.parameters())
