"""How long a computation over every head takes on 2 CPU cores, from figures measured there: the probabilities a
run's heads can make non-zero (`entries`), what reading every head's rows of a long run once more costs
(`read_seconds`), and a duration as a page says it (`duration`). The features' own estimates build on these
(`features/<id>/cost.py`); `benchmarks/estimates.py` sets each against the time measured."""

from __future__ import annotations

# every head's rows of a long run of SmolLM2 at 2,048 tokens read again (each layer's rows recomputed, a block at a
# time) on 2 quiet CPU cores: 6.6 s at stop 82, about 4.5 s at stop 93 (benchmarks/estimates.py: Compare 15.3 s
# = 1.7 × two readings, Hide tokens 9.7 s, three passes); the later figure, the machine being faster now
READ_S = 4.5 / (30 * 9 * 2048 * 2048 / 2)


def entries(run) -> float:
    """Probabilities of every head that a causal run can make non-zero (all of them otherwise)."""
    return run.num_layers * run.num_heads * run.n * run.n * (0.5 if run.is_causal else 1.0)


def read_seconds(run) -> float:
    """About how long reading every head's rows once more takes: 0 for a run that holds them."""
    return 0.0 if run.is_dense else READ_S * entries(run)


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
