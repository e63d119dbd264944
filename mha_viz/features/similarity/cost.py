"""How long *Head similarity* takes on 2 CPU cores: every pair of heads compared by a pattern measure (JS or
cosine) over their probabilities, and for a long run every head's rows read once more
(`budget.seconds.read_seconds`); the random-initialisation baseline as a multiple of the text's JS."""

from __future__ import annotations

from mha_viz.budget.seconds import entries, read_seconds

# measured on 2 quiet CPU cores (a long run of SmolLM2 at 2,048 tokens, 270 heads, benchmarks/estimates.py at stop
# 93): cosine 5.4 s in all, JS 21.5 s in all, of which about 4.5 s reading every head's rows (`read_seconds`); at
# 1,024 tokens 1.3 s and 6.9 s. (Stop 82 measured 19.5 s and 40 s; why cosine is 3.6 × faster now was not looked
# into.) On 2 cores shared with other work, 2.5-3.5 × longer.
COSINE_S = 1.0 / (270 * 270 * 30 * 9 * 2048 * 2048 / 2)
JS_S = 17.0 / (270 * 270 * 30 * 9 * 2048 * 2048 / 2)
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
