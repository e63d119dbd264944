"""How long *Compare texts or models* takes to compare two runs already made, on 2 CPU cores, by the basis it will
compare on (`views.comparison.basis_kind`): position by position or word by word it reads every head's rows of both
runs (`budget.seconds.read_seconds`: nothing for a run that holds them), by head metrics alone it reads the two
head tables the runs already hold."""

from __future__ import annotations

from mha_viz.budget.seconds import read_seconds
from mha_viz.views.comparison import basis_kind

# measured: two long runs of SmolLM2 at 2,048 tokens compared head by head in 23 s, 1.7 × reading every head of both
# (about 6 min at 8,192 tokens on 2 quiet cores)
COMPARE_X = 1.7


def compare_seconds(run_a, run_b) -> float:
    """About how long `mha_viz.compare(run_a, run_b)` takes here: 0 when it compares by head metrics (issue 90: a
    4,893-token text against a sentence was estimated at 64 s from both runs' reading and took 6.6 s in all;
    benchmarks/estimates.py measured the comparison itself at 0.02 s)."""
    if basis_kind(run_a, run_b) == "metrics":
        return 0.0
    return COMPARE_X * (read_seconds(run_a) + read_seconds(run_b))
