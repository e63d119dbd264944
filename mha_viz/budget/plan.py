"""A heavy computation planned once (issue 92): `Plan` holds what it runs on (its tokens, read once), what it needs
(`memory.Need`: the bytes of what will run, where it runs) and the work itself, so that the UI refuses and admits on
`plan.need` (`admission.Admission.hold`) and then calls `plan.run()`: nothing between the two prices or checks it
again. Where a computation takes the tokens read (Generate's prompt, edge attribution's texts) it does not read them
again; the others read their text once more inside, answered by `tokenize`'s cache of the last texts.

A computation offers `plan_<name>(model, text, …) -> Plan`, which tokenizes, prices and refuses what can never fit
(an `InputError` saying what does); its plain function is `plan_<name>(…).run()`. Here also the pieces every plan's
need is made of: `on_device` (working memory where the model runs, results on the host) and a plain forward's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from mha_viz.budget import memory
from mha_viz.text.tokenize import tokenize
from mha_viz_models import LoadedModel

T = TypeVar("T")


@dataclass(frozen=True)
class Plan(Generic[T]):
    """A computation on `n` tokens, read once: `need` is what it holds at its peak (None: admitted by count alone,
    for a computation whose size is known only as it runs), `run()` does it; `admit` False for one that runs no model
    (its answer read off a result already made)."""

    n: int
    need: memory.Need | None
    work: Callable[..., T]
    admit: bool = True  # False: it reads what is made already and runs no model, so nothing is admitted


    def run(self, **options) -> T:
        """The computation, on the tokens it was planned on (`options`: what it takes besides, known only when it
        runs: a generation's sampling, its progress and steps)."""
        return self.work(**options)


def on_device(model: LoadedModel, working: int, *, kept: int = 0) -> memory.Need:
    """`working` bytes where `model` runs (the GPU's for a model on CUDA, else the host's) and `kept` bytes of
    results in the host's memory."""
    place = memory.cuda_place(model.device)
    if place:
        return memory.Need(host=int(kept), gpu=int(working), device=place)
    return memory.Need(host=int(kept + working))


def forward_bytes(model: LoadedModel, n: int, rows: int = 1) -> int:
    """A plain forward of `rows` sequences of n tokens (no attention kept): per sequence one layer's
    scores on their way to the softmax (3 H n²), about 12 activations of width d_model a token (the
    residual stream, q, k, v, the MLP's wider hidden layer) and the logits (n × `memory.logits_width`)."""
    H, d = model.num_heads, model.d_model
    return 4 * rows * (3 * H * n * n + 12 * n * d + n * memory.logits_width(model))


def forward(model: LoadedModel, n: int, rows: int = 1) -> memory.Need:
    """Forward passes of `rows` sequences of n tokens side by side, keeping nothing (`forward_bytes`)."""
    return on_device(model, forward_bytes(model, n, rows))


def forward_plan(model: LoadedModel, text: str, max_tokens: int | None, work: Callable[..., T]) -> Plan[T]:
    """`work`, a computation that runs `model` forward over `text` (cut to max_tokens) holding about one plain
    forward at a time (a hybrid's other layers read one at a time, a sparse model's picks), planned: its tokens
    counted once, its need `forward`'s."""
    n = tokenize(model, text, max_tokens).n
    return Plan(n, forward(model, n), work)
