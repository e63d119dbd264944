"""The one way a long computation of the package says how far it is: a callback `progress(fraction, message)`,
the fraction done in [0, 1] and what is being done, in words for the user (the app draws it as a bar,
`mha_viz.ui.jobs`; a script may print it). A corpus run reports documents and their rate instead
(`mha_viz.corpus.engine.Progress`), and the model loader its own stages (`mha_viz_models`)."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[float, str], None]  # (fraction done, what is being done)


def report(progress: Progress | None, fraction: float, message: str) -> None:
    """Tell `progress` (None: nobody asked) that `fraction` of the work is done and what is under way."""
    if progress is not None:
        progress(fraction, message)
