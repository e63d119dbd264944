"""The *Corpus* page's jobs planned (`mha_viz.budget.plan`): the corpus's statistics (a batch's capture,
`batching.capture_bytes`, and the gradient passes of its importance) and the pruning check on the held-out documents
(`corpus.importance.plan_pruning_curves`: the documents read once for every order). Ray's actors, which load a model
of their own in other processes, are not counted."""

from __future__ import annotations

import numpy as np

from mha_viz import corpus as corpus_engine
from mha_viz.budget import capture_budget
from mha_viz.budget.memory import Need
from mha_viz.budget.plan import Plan, on_device
from mha_viz.corpus import importance as corpus_importance
from mha_viz.corpus.batching import capture_bytes
from mha_viz.interventions import ablation
from mha_viz.text.loss_inputs import EMBEDDING, loss_kind
from mha_viz_models import LoadedModel


def corpus(model: LoadedModel, batch: int, n: int, *, importance: bool) -> Need:
    """A corpus job (`corpus.head_statistics`) of batches of `batch` documents of at most n tokens: a
    batch's capture (`batching.capture_bytes`; batches shrink to the capture budget) and, with
    `importance`, its gradient passes (as many side by side as the capture budget allows, one at least), or for an
    embedding model the forwards of its heads' ablation effects (`ablation.effects_bytes`)."""
    work = min(capture_bytes(model, batch, n), max(capture_bytes(model, 1, n), capture_budget.capture_budget()))
    if importance:
        one = ablation.gradient_bytes(model, n)
        work = max(work, min(batch * one, max(one, capture_budget.capture_budget())))
        if loss_kind(model) == EMBEDDING:  # no gradient: the batch's copies under their head masks
            work = max(work, ablation.effects_bytes(model, n, batch))
    return on_device(model, work)


def plan_statistics(model: LoadedModel, docs: list[str], *, engine: str, batch: int, max_tokens: int,
                    importance: bool) -> Plan[corpus_engine.CorpusStats]:
    """`corpus.head_statistics` of `docs` (with the Head examples page's examples) planned: on at most `max_tokens`
    tokens a document, its need `corpus`'s (the documents are read batch by batch as it runs); `run(progress=)`."""
    def work(progress=None):
        return corpus_engine.head_statistics(model, docs, engine=engine, batch_size=batch, max_tokens=max_tokens,
                                             importance=importance, progress=progress,
                                             examples=corpus_engine.ExampleOptions())
    return Plan(max_tokens, corpus(model, batch, max_tokens, importance=importance), work)


def plan_pruning(model: LoadedModel, importance: np.ndarray, held: list[str], max_tokens: int, fractions,
                 randoms: int) -> Plan[np.ndarray]:
    """The pruning check: the curves of the importance order (least important first) and of `randoms` random orders
    (seeds 0…), (1 + randoms, len(fractions)), on the held-out documents read once."""
    order = np.argsort(np.asarray(importance).ravel())
    orders = [order] + [np.random.default_rng(seed).permutation(order.size) for seed in range(randoms)]
    return corpus_importance.plan_pruning_curves(model, held, orders, fractions, max_tokens=max_tokens)
