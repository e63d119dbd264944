"""*Circuit behind a prediction* planned once (issue 92, `budget.plan`): both texts read and checked
(`patching.texts`: a decoder, texts within the cap and of one length, one-token answers), the family's edges
(`edges.graph`: InputError where its heads' writes cannot be split) and the backward pass (`edges.check_budget`), each
said before the page's button; then the circuit found on those texts and its faithfulness curve run for real, admitted
on the job's need (`circuits.need.circuit`)."""

from __future__ import annotations

from mha_viz.budget.plan import Plan
from mha_viz.circuits import edges as circuit_edges
from mha_viz.circuits import need as job_need
from mha_viz.circuits import path_patching
from mha_viz.interventions.patching import texts
from mha_viz_models import LoadedModel


def plan_circuit(model: LoadedModel, clean: str, corrupted: str, answer: str | None, wrong: str | None, *,
                 method: str, max_tokens: int | None) -> Plan[circuit_edges.Edges]:
    """The circuit of the pair by `method` ("eap" or "eap-ig"), planned: InputError saying why it cannot run, before
    anything runs. `run(progress=…)` scores every edge (60 % of the progress), then runs the top-k circuits for
    real (the curve, in `Edges.extra["curve"]`)."""
    read = texts(model, clean, corrupted, answer, wrong, None, max_tokens, what="edge attribution")
    circuit_edges.check_budget(model, circuit_edges.graph(model), read.n, 1, circuit_edges.attributing(model, method))

    def work(progress=None):
        progress = progress or (lambda _f, _m: None)
        found = circuit_edges.edge_attribution(model, clean, corrupted, answer, wrong, method=method,
                                               max_tokens=max_tokens, read=read,
                                               progress=lambda f, m: progress(0.6 * f, m))
        curve = path_patching.faithfulness_curve(
            model, clean, corrupted, found, path_patching.curve_sizes(len(found.scores)), max_tokens=max_tokens,
            progress=lambda f, m: progress(0.6 + 0.4 * f, f"Running the top-k circuits for real: {m}"))
        found.extra["curve"] = curve.to_dict(orient="list")
        return found
    return Plan(read.n, job_need.circuit(model, read.n, method=method), work)
