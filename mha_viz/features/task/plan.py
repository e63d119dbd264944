"""*Heads behind a task* planned once (issue 92, `budget.plan`): the pairs checked (`prompt_set.check`), the set's
longest clean prompt read once, the method's refusals said before its button (a family whose heads' writes cannot be
split, a gradient pass or a batch over the longest pair that would not fit) and its memory need, then the method run
over the same pairs (`run(progress=…)`), admitted on that need: nothing is checked again inside the job."""

from __future__ import annotations

import mha_viz
from mha_viz.budget.plan import Plan
from mha_viz.circuits import edges as circuit_edges
from mha_viz.circuits import need as job_need
from mha_viz.features.task.controls import EDGE_METHODS, IG_STEPS
from mha_viz.interventions import estimate
from mha_viz.tasks.prompt_set import PromptSet, check
from mha_viz.text.tokenize import tokenize
from mha_viz_models import LoadedModel

RESAMPLES = 1000  # the bootstrap's resamples of the mean over the pairs


def longest_clean(prompts: PromptSet) -> str:
    """The set's longest clean prompt: what a job's memory need and budget are worked out on."""
    return max((p.clean for p in prompts.pairs), key=len)


def plan_task(model: LoadedModel, prompts: PromptSet, method: str, cap: int) -> Plan:
    """`method` (one of the page's METHODS) over `prompts` at the token cap `cap`, planned: InputError saying why it
    cannot run, before anything runs; else `n` the longest clean prompt's tokens and `need` what the job holds."""
    check(model, prompts, cap)
    longest = longest_clean(prompts)
    n = tokenize(model, longest, cap).n
    if method in EDGE_METHODS:
        circuit_edges.check_budget(model, circuit_edges.graph(model), n, 1, circuit_edges.attributing(model, method))
        need = job_need.circuit(model, n, method=method, steps=IG_STEPS)
    else:
        n, need = job_need.pair_job(model, longest, cap, batch=method == "patch")
        if method == "estimate":  # every pair's backward pass, which the set's estimate cannot do without
            estimate.check_budget(model, n)
    return Plan(n, need, lambda progress=None: _run(model, prompts, method, cap, progress))


def _run(model: LoadedModel, prompts: PromptSet, method: str, cap: int, progress):
    if method == "estimate":
        return mha_viz.estimate_heads(model, prompts, max_tokens=cap, resamples=RESAMPLES, progress=progress)
    if method == "patch":
        return mha_viz.patch_heads(model, prompts, max_tokens=cap, resamples=RESAMPLES, progress=progress)
    if method in EDGE_METHODS:
        return mha_viz.edge_attribution(model, prompts, method=method, steps=IG_STEPS, max_tokens=cap,
                                        resamples=RESAMPLES, progress=progress)
    return mha_viz.direct_logit(model, prompts, max_tokens=cap, resamples=RESAMPLES, progress=progress)
