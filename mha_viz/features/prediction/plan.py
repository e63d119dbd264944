"""*Heads behind a prediction* planned once (issue 92, `budget.plan`): the estimate of a pair, and real patching of
every head once the estimate is there, each checked before its button (`circuits.need.pair_job`: the longest text
that fits, when it would pass the capture budget) and run by its job on the need it was checked with."""

from __future__ import annotations

from mha_viz.budget.plan import Plan
from mha_viz.circuits import need as job_need
from mha_viz.interventions import prediction
from mha_viz_models import LoadedModel


def plan_estimate(model: LoadedModel, clean: str, corrupted: str, answer: str | None, wrong: str | None, *,
                  max_tokens: int | None) -> Plan[prediction.Explanation]:
    """The pair's explanation (`prediction.explain`), planned: InputError before anything runs when it cannot fit;
    `run(progress=…)` explains."""
    n, need = job_need.pair_job(model, clean, max_tokens, batch=False)
    return Plan(n, need, lambda progress=None: prediction.explain(model, clean, corrupted, answer, wrong,
                                                                   max_tokens=max_tokens, progress=progress))


def plan_patching(model: LoadedModel, explanation: prediction.Explanation, clean: str, corrupted: str, *,
                  max_tokens: int | None) -> Plan[prediction.Explanation]:
    """Every head of the pair patched for real (`prediction.patch`: one batched forward a layer), planned:
    InputError before anything runs when the batch cannot fit; `run(progress=…)` is `explanation` with it."""
    n, need = job_need.pair_job(model, clean, max_tokens, batch=True)
    return Plan(n, need, lambda progress=None: prediction.patch(model, explanation, clean, corrupted,
                                                                 max_tokens=max_tokens, progress=progress))
