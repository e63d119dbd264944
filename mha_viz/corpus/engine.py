"""`head_statistics`: head statistics over a whole corpus, streamed batch by batch on this
machine (engine="local") or on Ray actors kept across jobs (engine="ray", `mha_viz.corpus.ray_engine`).

The local engine holds one batch's attentions at a time: each batch becomes a `Partial` of
per-head sums, added to the running total and dropped. After each batch `progress(fraction, message)` is called,
the package's one protocol (`mha_viz.progress`): the share of the documents done, and a message that counts them,
gives their rate and the time left (from the pace of the work done after the first batch, `budget.time_left`);
returning False stops the run with `Cancelled`. A callback of the form before, `progress(done, total, docs_per_s,
eta_s)`, still works for one release, with a DeprecationWarning.
"""

from __future__ import annotations

import inspect
import time
import warnings

from mha_viz.budget.time_left import TimeLeft
from mha_viz.corpus.accumulate import Partial, batch_partial, model_weights
from mha_viz.corpus.batching import plan_indexed, work
from mha_viz.corpus.examples import ExampleOptions
from mha_viz.corpus.examples_result import HeadExamples
from mha_viz.corpus.inputs import corpus_hash, read_texts
from mha_viz.corpus.stats import CorpusStats
from mha_viz.progress import Cancelled, Counted, Progress, counted
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.loading.loader import load_model

ENGINES = ("local", "ray")


def documents(progress: Progress | None) -> Counted:
    """What an engine calls after each batch: `progress` told the share of the documents done and a message
    (`mha_viz.progress.counted`); `Cancelled` when it returns False. A callback of the old form,
    `progress(done, total, docs_per_s, eta_s)` (four arguments), gets those numbers, with a DeprecationWarning."""
    try:
        needed = [p for p in inspect.signature(progress).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):  # None, or a callable without a signature
        needed = []
    if len(needed) != 4:
        return lambda done, total, seconds, left: counted(progress, done, total, seconds, left)
    warnings.warn("head_statistics' progress(done, total, docs_per_s, eta_s) is deprecated: give it "
                  "progress(fraction, message), the package's one protocol (mha_viz.progress); returning False "
                  "still cancels.", DeprecationWarning, stacklevel=3)

    def old(done: int, total: int, seconds: float, left: float | None) -> None:
        eta = float("nan") if left is None else left
        if progress(done, total, done / max(seconds, 1e-9), eta) is False:
            raise Cancelled(done, total)
    return old


def head_statistics(model, texts, *, engine: str = "local", batch_size: int = 16, max_tokens: int | None = 128,
                    importance: bool = True, progress: Progress | None = None, dtype: str = "auto",
                    examples: ExampleOptions | None = None) -> CorpusStats:
    """Every head's statistics averaged over the documents of `texts` (each document weighs
    the same); see `CorpusStats`.

    model: a registry name, hub id or folder (loaded with `mha_viz.load_model`), or, for the
    local engine, a `LoadedModel`. texts: anything `read_texts` accepts (a list of strings, a
    .txt / .jsonl / .csv path, "sample", a dataset id). max_tokens: each document is cut to
    this many tokens (and to the model's and the session's caps, as everywhere).
    importance: also accumulate Michel et al.'s gradient importance (or the ablation effect
    for embedding-only models); when it cannot be computed, `importance` is None with the reason.
    dtype: the precision a model given by name is loaded in (`load_model`); the Ray engine's actors
    load theirs in the checkpoint's own ("auto") and refuse another.
    examples: also keep each head's examples in the same pass (`CorpusStats.examples`,
    `corpus.examples`), with these options.
    Raises CorpusError for an unreadable corpus, Cancelled when `progress` returns False.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use one of {', '.join(ENGINES)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}")
    if engine == "ray":
        if dtype != "auto":
            raise InputError("The Ray engine loads each model in its checkpoint's own precision: leave the "
                             "precision at auto, or use the local engine.")
        # heavy optional (ray): imported only when the Ray engine is chosen
        from mha_viz.corpus import ray_engine
        return ray_engine.run(model, texts, batch_size=batch_size, max_tokens=max_tokens,
                              importance=importance, progress=documents(progress), examples=examples)
    docs = read_texts(texts)
    loaded = model if isinstance(model, LoadedModel) else load_model(str(model), dtype=dtype)
    return run_local(loaded, docs, batch_size=batch_size, max_tokens=max_tokens, importance=importance,
                     progress=progress, examples=examples)


def head_examples(model, texts, *, top: int = 10, per_decile: int = 3, max_tokens: int | None = 128,
                  engine: str = "local", batch_size: int = 16, progress: Progress | None = None,
                  skip: str = "first", dtype: str = "auto") -> HeadExamples:
    """Each head's examples over the documents of `texts` (`corpus.examples`): `.top(layer, head)`,
    `.deciles`, `.histogram`, `.distances`, `.top_tokens`, `.pattern(doc, layer, head)`. Document
    indices are positions in what `read_texts(texts)` yields. The same inputs and engines as
    `head_statistics`, whose pass computes them (`head_statistics(…, examples=ExampleOptions(…))`
    gives both at once); here without importance."""
    options = ExampleOptions(top=top, per_decile=per_decile, skip=skip)
    return head_statistics(model, texts, engine=engine, batch_size=batch_size, max_tokens=max_tokens,
                           importance=False, progress=progress, dtype=dtype, examples=options).examples


def run_local(model: LoadedModel, docs: list[str], *, batch_size: int = 16, max_tokens: int | None = 128,
              importance: bool = True, progress: Progress | None = None,
              examples: ExampleOptions | None = None) -> CorpusStats:
    """The local engine on documents already read (`read_texts`)."""
    tell = documents(progress)
    weights = model_weights(model)
    total, done = len(docs), 0
    start = time.perf_counter()
    batches = list(plan_indexed(docs, batch_size))
    left = TimeLeft(sum(work([text for _, text in indexed], max_tokens) for indexed in batches))
    acc = Partial.empty(model.num_layers, model.num_heads, model.name)
    for indexed in batches:
        batch = [text for _, text in indexed]
        acc = acc.merge(batch_partial(model, batch, max_tokens=max_tokens, importance=importance, weights=weights,
                                      examples=examples, docs=[i for i, _ in indexed]))
        done += len(batch)
        tell(done, total, time.perf_counter() - start, left.step(work(batch, max_tokens)))
    return acc.finish(corpus_hash=corpus_hash(docs), max_tokens=max_tokens, seconds=time.perf_counter() - start)
