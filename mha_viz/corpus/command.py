"""The command line's `corpus` command (`mha-viz corpus …`, parsed by `mha_viz.cli`): head statistics over a
corpus, saved to a folder, with a progress bar on stderr and a short table of the top heads on stdout. A bad corpus,
model or engine is one line on stderr and exit code 2, never a traceback. Its own module so that the command line,
which mostly starts the app, imports the corpus's libraries (PyTorch, transformers) only for this command."""

from __future__ import annotations

import argparse
import sys
import time

from mha_viz.corpus.engine import ENGINES, head_statistics
from mha_viz.corpus.examples import ExampleOptions
from mha_viz.corpus.inputs import read_texts
from mha_viz.corpus.stats import CorpusStats
from mha_viz.metrics.measures import METRICS
from mha_viz.text.tokenize import InputError
from mha_viz_models.errors import ModelLoadError

BAR = 30  # characters of the progress bar
TOP = 5  # heads listed per metric in the summary
# (head-table column, largest first): what the summary ranks heads by, when the table has the column; each
# is labelled by the metric catalogue (`mha_viz.metrics.METRICS`)
SUMMARY = (("prev", True), ("first", True), ("induction_score", True), ("norm_entropy", False))


class ProgressBar:
    """A job's progress (`mha_viz.progress.Progress`) drawn on a stream: a bar and the job's message (a corpus's:
    documents done, documents/s, the time left)."""

    def __init__(self, stream=None) -> None:  # None: this process's stderr as it is now, not at import
        self.stream, self.shown = sys.stderr if stream is None else stream, False

    def __call__(self, fraction: float, message: str) -> None:
        filled = int(BAR * min(max(fraction, 0.0), 1.0))
        self.stream.write(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {message} ")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def summary(stats: CorpusStats) -> str:
    """The top heads by a few metrics (and by importance), as plain text lines."""
    table = stats.table
    lines = [f"{stats.model_name}: {stats.n_docs:,} documents, {stats.n_tokens:,} tokens, "
             f"{stats.num_layers} layers × {stats.num_heads} heads"]
    ranked = [(c, METRICS[c].label.lower() + ("" if big else " (lowest)"), big) for c, big in SUMMARY
              if c in table.columns]
    if stats.importance is not None:
        table = table.assign(importance=stats.importance[table["layer"], table["head"]])
        ranked.append(("importance", "importance (per-layer normalised)", True))
    for column, label, largest in ranked:
        top = table.sort_values(column, ascending=not largest, kind="stable").head(TOP)
        heads = "  ".join(f"L{r.layer}H{r.head} {getattr(r, column):.3f}" for r in top.itertuples())
        lines.append(f"  {label:<36} {heads}")
    if stats.importance is None and stats.importance_note:
        lines.append(f"  importance: {stats.importance_note}")
    counts = table["pattern"].value_counts()
    lines.append("  pattern classes (majority): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    docs = read_texts(args.input, text_column=args.text_column)
    docs = docs if args.first is None else docs[:args.first]
    bar = ProgressBar()
    start = time.perf_counter()
    try:
        stats = head_statistics(args.model, docs, engine=args.engine, batch_size=args.batch_size,
                                       max_tokens=args.max_tokens, importance=args.importance, progress=bar,
                                       dtype=args.dtype, examples=ExampleOptions() if args.examples else None)
    finally:
        bar.close()
    folder = stats.save(args.out)
    print(f"Saved the statistics of {stats.n_docs:,} documents to {folder}/ "
          f"({time.perf_counter() - start:.1f} s, engine {args.engine})")
    print(summary(stats))
    if stats.examples is not None:
        heads = stats.num_layers * stats.num_heads
        print(f"  head examples: {len(stats.examples.part.patterns):,} kept patterns, "
              f"{stats.examples.nbytes() / heads / 1024:.0f} KiB a head")
    return 0


def run(args: argparse.Namespace) -> int:
    """The `corpus` command on parsed arguments; returns the exit code (2: bad input, with a one-line message)."""
    if args.batch_size < 1 or args.max_tokens < 1:
        print("error: --batch-size and --max-tokens must be at least 1", file=sys.stderr)
        return 2
    if args.engine not in ENGINES:
        print(f"error: --engine must be one of {', '.join(ENGINES)}, not {args.engine!r}", file=sys.stderr)
        return 2
    try:
        return _run(args)
    except (InputError, ModelLoadError, OSError) as exc:  # CorpusError is an InputError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - out of memory, a Ray worker lost…: one line, not a traceback
        print(f"error: the corpus job failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 1
