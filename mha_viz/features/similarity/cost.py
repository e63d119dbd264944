"""How long *Head similarity* takes on 2 CPU cores: every pair of heads compared by a pattern measure (JS or
cosine) over their probabilities, and for a long run every head's rows read once more
(`budget.seconds.read_seconds`); the random-initialisation baseline as a multiple of the text's JS."""

from __future__ import annotations

from mha_viz.budget.seconds import entries, read_seconds

# measured on 2 quiet CPU cores (a long run of SmolLM2 at 2,048 tokens, 270 heads): cosine 19.5 s in all, JS 40 s
# in all, of which 6.6 s reading every head's rows (`read_seconds`); at 8,192 tokens about 16 × that:
# cosine about 5 min, JS about 11 min (on 2 cores shared with other work, 2.5-3.5 × longer)
COSINE_S = 13.0 / (270 * 270 * 30 * 9 * 2048 * 2048 / 2)
JS_S = 34.0 / (270 * 270 * 30 * 9 * 2048 * 2048 / 2)
PATTERN_KINDS = ("js", "cosine")  # the kinds that read every head's probabilities
BASELINE_X = 5  # measured: the baseline takes about 5× the JS of the text (model, forward, near-uniform JS)


def js_seconds(run) -> float:
    """The JS of every pair of heads, the rows read included. Measured: 144 heads at 512 tokens take about 4 s on
    2 CPU cores (half for causal runs)."""
    N = run.num_layers * run.num_heads
    return 4.0 * N * N / 2 * entries(run) / run.num_layers / run.num_heads / (144 * 144 / 2 * 512 * 512) \
        + read_seconds(run)


def similarity_seconds(run, kind: str) -> float:
    """About how long comparing every pair of heads by a pattern measure takes here: the pairwise sums,
    and for a long run (rows recomputed, `is_dense` False) every head's rows read once more; 0 for the
    measures of weights and outputs (`PATTERN_KINDS` alone read the probabilities)."""
    if kind not in PATTERN_KINDS:
        return 0.0
    N = run.num_layers * run.num_heads
    return (JS_S if kind == "js" else COSINE_S) * N * N * entries(run) + read_seconds(run)
