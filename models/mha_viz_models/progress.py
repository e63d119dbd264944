"""The shape of every progress callback of mha-viz, declared once here (the lowest layer): `progress(fraction,
message)`, the fraction done in [0, 1] and what is under way in words for the user; a callback that returns False
asks a job that can stop between its steps to stop (`mha_viz.progress` says which do). The model loader reports
through it and ignores the answer."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[float, str], "bool | None"]  # (fraction done, what is being done) -> False to stop
