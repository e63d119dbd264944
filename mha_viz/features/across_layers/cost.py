"""How long *Across layers*' attention rollout takes on 2 CPU cores, a layer at a time."""

from __future__ import annotations

# one layer of a long run's rollout on 2 CPU cores, N thousand tokens: a × N² + b × N³ (its head mean ∝ N², its
# product ∝ N³). Stop 118 measured SmolLM2's layers apart: head mean 0.079, 0.263, 1.165 s and product 0.036, 0.227,
# 1.471 s at 2,048, 4,096 and 8,192 tokens (the product on a machine whose matrix products are slower than where the
# first fit, 0.35 s a layer at 4,096 and 1.44 s at 8,192, was measured: stated at 10.5 s, every layer at 4,096 took
# 13.1 s there, 14.7 s here). Fitted to the slower machine's 4,096 and 8,192, a at least the first fit's: a stated
# cost that errs long, not short. Past 8,192 tokens an extrapolation.
LAYER_SECONDS = (0.020, 0.0025)


def rollout_seconds(run, layers: int) -> float:
    """About how long rolling out `layers` layers of `run` takes on 2 CPU cores (`LAYER_SECONDS`)."""
    thousands = run.n / 1000
    return layers * (LAYER_SECONDS[0] * thousands ** 2 + LAYER_SECONDS[1] * thousands ** 3)
