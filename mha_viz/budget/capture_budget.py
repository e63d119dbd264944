"""The capture budget, checked in this one place: MHA_VIZ_MAX_CAPTURE_MB, the most bytes of attention
probabilities one capture may hold (and the most a gradient pass may hold), compared with a
computation's need before it runs.

`capture_budget()` reads the setting; `fits` compares (a batch grows while it fits);
`over_budget` says by how much a need is over, in the words every refusal uses; `check` refuses a
computation with those words: "<doing> would hold 3.0 MiB of attention, 1.0 MiB more than the limit
here (2.0 MiB, MHA_VIZ_MAX_CAPTURE_MB): <advice>". An analysis (`memory.shortfall`), a generation, an
encoder–decoder capture and a corpus batch all go through it.
"""

from __future__ import annotations

from mha_viz import settings
from mha_viz.text.tokenize import InputError

SETTING = "MHA_VIZ_MAX_CAPTURE_MB"


def capture_budget() -> int:
    """Bytes one capture may hold: MHA_VIZ_MAX_CAPTURE_MB, read now."""
    return settings.from_env().max_capture_bytes


def fits(need: int, budget: int | None = None) -> bool:
    """Whether `need` bytes stay within `budget` (default: `capture_budget()`)."""
    return need <= (capture_budget() if budget is None else budget)


def over_budget(need: int, budget: int | None = None) -> str:
    """What `need` bytes of attention would hold against `budget` (default: `capture_budget()`):
    "3.0 MiB of attention, 1.0 MiB more than the limit here (2.0 MiB, MHA_VIZ_MAX_CAPTURE_MB)", or ""
    when it fits."""
    budget = capture_budget() if budget is None else budget
    if need <= budget:
        return ""
    size = settings.size_text
    return f"{size(need)} of attention, {size(need - budget)} more than the limit here ({size(budget)}, {SETTING})"


def check(need: int, doing: str, advice: str, *, budget: int | None = None,
          error: type[InputError] = InputError) -> None:
    """Raise `error` (an InputError) when `need` bytes of attention are over `budget` (default:
    `capture_budget()`), before anything runs: "<doing> would hold <over_budget>: <advice>"."""
    over = over_budget(need, budget)
    if over:
        raise error(f"{doing} would hold {over}: {advice}")


def longest(cost, budget: int | None = None, *, top: int = 1 << 20) -> int:
    """The largest n (tokens) in 0..top whose `cost(n)` bytes stay within `budget` (default: `capture_budget()`), for
    a cost that grows with n: what a refusal offers as the length that fits."""
    budget = capture_budget() if budget is None else budget
    low, high = 0, top
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if cost(mid) <= budget else (low, mid - 1)
    return low
