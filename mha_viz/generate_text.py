"""`generate`, published as `mha_viz.generate`: `mha_viz.capture.generation.generate`, whose long
generations (past MHA_VIZ_DENSE_MB, as `analyze` decides) take their run from one scan of the final
sequence (`mha_viz.scan.long_run`). At the top, as `analyze` is: capture does not import the scan."""

from __future__ import annotations

from mha_viz.capture import generation
from mha_viz.capture.generation import Generation
from mha_viz.scan.long_run import long_run
from mha_viz_models import LoadedModel


def generate(model: LoadedModel, prompt: str, max_new_tokens: int = 32, **settings) -> Generation:
    """Continue `prompt`, recording every head's attention: see `mha_viz.capture.generation.generate`
    (temperature, top_k, top_p, seed, stop_at_eos, max_tokens, progress, on_step, dense)."""
    return generation.generate(model, prompt, max_new_tokens, long_run=long_run, **settings)

