"""`generate`, published as `mha_viz.generate`: `mha_viz.capture.generation.generate`, whose long
generations (past MHA_VIZ_DENSE_MB, as `analyze` decides) take their run from one scan of the final
sequence (`mha_viz.scan.long_run`). At the top, as `analyze` is: capture does not import the scan. `plan_generation`
is the same planned once (`mha_viz.budget.plan`): the prompt read and checked, the need of what will run."""

from __future__ import annotations

from typing import Callable

from mha_viz import needs
from mha_viz.budget.plan import Plan
from mha_viz.capture import generation
from mha_viz.capture.generation import Generation
from mha_viz.progress import Progress
from mha_viz.scan.long_run import long_run
from mha_viz_models import LoadedModel


def generate(model: LoadedModel, prompt: str, max_new_tokens: int = 32, *, temperature: float = 0.0,
             top_k: int = 50, top_p: float = 1.0, seed: int = 0, stop_at_eos: bool = True,
             max_tokens: int | None = None, progress: Progress | None = None,
             on_step: Callable[[Generation], bool | None] | None = None, dense: bool | None = None,
             views: bool = True) -> Generation:
    """Continue `prompt` by up to `max_new_tokens` tokens, recording every head's attention (greedy at
    temperature 0; sampling with temperature, top_k, top_p, reproducible under seed). `dense`: None decides
    as `analyze` does, True holds every head's array, False keeps only the rows the cache computes and takes
    the run from one scan. `views`: a long generation's run ends with that scan of the whole sequence (its
    summary and thumbnails, for the views); False leaves it out when only the new tokens' rows are read (the
    prompt's earlier rows are then scanned only if asked for). See `mha_viz.capture.generation.generate`."""
    return generation.generate(model, prompt, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                               seed=seed, stop_at_eos=stop_at_eos, max_tokens=max_tokens, progress=progress,
                               on_step=on_step, dense=dense, long_run=long_run, views=views)


def plan_generation(model: LoadedModel, prompt: str, max_new_tokens: int = 32, *, max_tokens: int | None = None,
                    dense: bool | None = None) -> Plan[Generation]:
    """`generate` planned once: the prompt read and the generation checked (GenerationError, saying what fits, before
    anything runs), `n` the prompt and new tokens together, `need` what it holds as it will run (`needs.generation`,
    long or not as `generate` decides). `run(temperature=…, seed=…, progress=…, on_step=…)` generates on the same
    tokens, with `generate`'s other options."""
    prepared = generation.prepare(model, prompt, max_new_tokens, max_tokens=max_tokens, dense=dense)
    n = prepared.tokens.n + prepared.max_new
    return Plan(n, needs.generation(model, n, prepared.max_new, long=prepared.long),
                lambda **options: generation.generate(model, prompt, prepared.max_new, max_tokens=max_tokens,
                                                      dense=dense, long_run=long_run, prepared=prepared, **options))
