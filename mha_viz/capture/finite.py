"""Every live run checked for NaN and infinity: a model computing in half precision can overflow on one
text and not on another, and a NaN would otherwise be drawn as background. `FiniteCheck` looks at each
layer's probabilities (and a decoder's scores) as they are made, on their own device, and raises
`NotFiniteError`, whose message names the precision the model computed in and what to choose instead.
"""

from __future__ import annotations

import torch

from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.loading.precision import NOT_FINITE

IN_FLOAT32 = ("in float32 the precision is not the cause: the model's weights, or this text, drive its numbers out "
              "of range. Try another text, or check the model's weights")


class NotFiniteError(InputError):
    """A run met NaN or infinity in the attention probabilities or the scores: the message names where, the
    precision the model computed in and what to do. Shown like any InputError; the UI also logs its traceback."""


def message(model: LoadedModel, where: str) -> str:
    """What the user reads: `where` (e.g. "attention in layer 3") went NaN or infinite, why in this
    precision, and the precision to choose instead."""
    precision = model.precision or "float32"
    if precision in NOT_FINITE:
        why, instead = NOT_FINITE[precision]
        todo = (f"{why} on this text. Choose {instead} under Precision in the sidebar (dtype= in "
                "mha_viz.load_model) and run again.")
    else:
        todo = IN_FLOAT32 + "."
    return f"The {where} of {model.name} came out not finite (NaN or infinity) in {precision}: {todo}"


class FiniteCheck:
    """Whether every tensor `see`n is finite, each reduced to one number on its own device as it passes
    (no wait for a GPU until `verify`). The test is the float32 sum of the tensor: NaN or infinity
    anywhere makes it NaN or infinite, and a sum of finite probabilities or scores never overflows
    float32. A sum reads each number once and allocates nothing (`isfinite(t).all()` writes a mask
    as large as the tensor first, ten times slower on the CPU)."""

    def __init__(self, model: LoadedModel, error: type[NotFiniteError] = NotFiniteError) -> None:
        self.model, self.error = model, error
        self._sums: list[tuple[str, torch.Tensor]] = []

    def see(self, tensor: torch.Tensor, where: str) -> torch.Tensor:
        """`tensor`, unchanged, its sum kept under `where` (how the message names it: "attention in layer 3")."""
        self._sums.append((where, tensor.detach().sum(dtype=torch.float32)))
        return tensor

    def verify(self) -> None:
        """`error` (NotFiniteError) naming the first tensor seen that holds NaN or infinity."""
        sums, self._sums = self._sums, []
        for where, total in sums:
            if not bool(torch.isfinite(total)):
                raise self.error(message(self.model, where))
