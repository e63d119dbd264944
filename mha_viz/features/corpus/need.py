"""What the *Corpus* page's jobs declare to the admission (`admission.Admission.hold`): the corpus's statistics
(a batch's capture, `batching.capture_bytes`, and the gradient passes of its importance) and the pruning curve.
Ray's actors, which load a model of their own in other processes, are not counted."""

from __future__ import annotations

from mha_viz.budget import capture_budget
from mha_viz.budget.plan import forward_bytes, on_device
from mha_viz.corpus.batching import capture_bytes
from mha_viz.interventions import ablation
from mha_viz.needs import Need
from mha_viz_models import LoadedModel


def corpus(model: LoadedModel, batch: int, n: int, *, importance: bool) -> Need:
    """A corpus job (`corpus.head_statistics`) of batches of `batch` documents of at most n tokens: a
    batch's capture (`batching.capture_bytes`; batches shrink to the capture budget) and, with
    `importance`, its gradient passes (as many side by side as the capture budget allows, one at least)."""
    work = min(capture_bytes(model, batch, n), max(capture_bytes(model, 1, n), capture_budget.capture_budget()))
    if importance:
        one = ablation.gradient_bytes(model, n)
        work = max(work, min(batch * one, max(one, capture_budget.capture_budget())))
    return on_device(model, work)


def pruning(model: LoadedModel, docs: int, n: int) -> Need:
    """A pruning curve over `docs` documents of at most n tokens: forward passes of as many documents side
    by side as the capture budget allows (one at least)."""
    one = forward_bytes(model, n)
    return on_device(model, min(docs * one, max(one, capture_budget.capture_budget())))
