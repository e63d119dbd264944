"""The one way a long computation of the package says how far it is, and is stopped: a callback
`progress(fraction, message)`, the fraction done in [0, 1] and what is being done, in words for the user (the
app draws it as a bar, `mha_viz.ui.kit.jobs`; a script may print it). Every job of the package takes it: a run, a
scan, a task, a corpus (whose message counts the documents, their rate and the time left), and the model
loader (`mha_viz_models`, which imports nothing from here, takes the same shape). A callback that returns
False asks the job to stop: a job that can stop between its steps then raises `Cancelled` (the corpus does,
between batches); the app stops a job by raising from its callback instead (Streamlit's stop)."""

from __future__ import annotations

import time
from typing import Callable

from mha_viz.budget.time_left import TimeLeft, say
from mha_viz_models.progress import Progress  # the one declaration: (fraction, message) -> False to stop

Counted = Callable[[int, int, float, "float | None"], None]  # `counted`'s own: (done, of total, seconds, time left)


class Cancelled(Exception):
    """A job stopped because its progress callback returned False, after `done` of `total` `unit`."""

    def __init__(self, done: int, total: int, unit: str = "documents") -> None:
        super().__init__(f"Cancelled after {done:,} of {total:,} {unit}.")
        self.done, self.total = done, total


def report(progress: Progress | None, fraction: float, message: str) -> bool:
    """Tell `progress` (None: nobody asked) that `fraction` of the work is done and what is under way; False
    when the callback asked the job to stop (it returned False)."""
    return progress is None or progress(fraction, message) is not False


def counted(progress: Progress | None, done: int, total: int, seconds: float, left: float | None,
            unit: str = "documents") -> None:
    """Report `done` of `total` `unit` after `seconds`, with their rate and the time `left` (None: not known
    yet); raise `Cancelled` when the callback asks to stop."""
    rate = done / max(seconds, 1e-9)
    message = f"{done:,} of {total:,} {unit} · {rate:.1f} {unit}/s · {say(left)}"
    if not report(progress, done / max(total, 1), message):
        raise Cancelled(done, total, unit)


def with_time_left(progress: Progress, *, clock: Callable[[], float] = time.perf_counter) -> Progress:
    """`progress` told the time left too ("… · about 42 s left"), from the pace of the fraction done since the first
    report (`budget.time_left`: the first step is a warm-up, left out of the pace)."""
    timer = TimeLeft(1.0, clock=clock)

    def told(fraction: float, message: str) -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        left = timer.step(max(fraction - timer.done, 0.0))
        progress(fraction, f"{message} · {say(left)}")
    return told
