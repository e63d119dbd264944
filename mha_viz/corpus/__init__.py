"""Head statistics over a whole corpus (issue 14): every head's table averaged over many
documents, with spread, majority pattern class, importance and pattern similarity.

Public API::

    from mha_viz import corpus
    stats = corpus.head_statistics(model, texts, *, engine="local", batch_size=16, max_tokens=128,
                                   importance=True, progress=None)          # -> corpus.CorpusStats
    stats.table, stats.importance, stats.similarity, stats.lengths     # lengths: documents by token count
    corpus.length_check(stats.lengths, n, "entropy", z).explains       # z: a sentence's deviations in sd
    stats.save(folder); corpus.CorpusStats.load(folder)
    ex = corpus.head_examples(model, texts, top=10, per_decile=3, max_tokens=128)   # -> corpus.HeadExamples
    ex.top(layer, head), ex.deciles(layer, head), ex.histogram(layer, head), ex.distances(layer, head)
    ex.top_tokens(layer, head, "key"), ex.pattern(doc, layer, head), ex.tokens(doc)
    # both in one pass: head_statistics(…, examples=corpus.ExampleOptions()) -> stats.examples

Modules, one idea each (none imports streamlit; only `ray_engine` and `ray_engine_pool` import
ray, and only the `engine="ray"` branch imports them):

- `inputs`: `read_texts`, `read_upload`, `corpus_hash`, `CorpusError`, the bundled sample.
- `batching`: documents in padded batches, cut back into one `AttentionRun` each.
- `accumulate`: `Partial`, per-head sums over documents (picklable, mergeable); `batch_partial`.
- `stats`: `CorpusStats`, the result, and its save / load.
- `importance`: corpus head importance (`batch_importance`).
- `examples`: each head's top documents, decile samples and histograms, mergeable (`ExamplesPartial`);
  `examples_result`: `HeadExamples`, the result, and its files.
- `engine`: `head_statistics`; `Cancelled` (`mha_viz.progress`: raised when the progress callback returns False).
- `length`: whether a length difference explains one sentence's deviations from the corpus
  (`length_check`, its rule in the module's docstring; `CorpusStats.lengths` counts the documents by length).
- `ray_engine`: the Ray engine (a job's batches on the kept actors); `ray_engine_pool`: the actors,
  one model loaded each, kept across jobs in the process and shut down at exit.
"""

from mha_viz.corpus.accumulate import PATTERN_ORDER, Partial, batch_partial, model_weights, pattern_class
from mha_viz.corpus.batching import capture_runs, plan
from mha_viz.corpus.engine import ENGINES, head_examples, head_statistics, run_local
from mha_viz.corpus.examples import ExampleOptions
from mha_viz.corpus.examples_result import HeadExamples
from mha_viz.corpus.inputs import (
    SAMPLE,
    SAMPLE_PATH,
    SAMPLE_SOURCE,
    TEXT_COLUMNS,
    CorpusError,
    corpus_hash,
    read_texts,
    read_upload,
)
from mha_viz.corpus.length import LengthCheck
from mha_viz.corpus.length import check as length_check
from mha_viz.corpus.stats import CorpusStats
from mha_viz.progress import Cancelled

__all__ = [
    "ENGINES", "PATTERN_ORDER", "SAMPLE", "SAMPLE_PATH", "SAMPLE_SOURCE", "TEXT_COLUMNS", "Cancelled", "CorpusError",
    "CorpusStats", "ExampleOptions", "HeadExamples", "LengthCheck", "Partial", "batch_partial", "head_examples",
    "capture_runs", "corpus_hash", "head_statistics", "length_check", "model_weights", "pattern_class", "plan",
    "read_texts", "read_upload", "run_local",
]
