"""How long *Across layers*' attention rollout takes on 2 CPU cores, a layer at a time."""

from __future__ import annotations

# one layer of a long run's rollout on 2 CPU cores, N thousand tokens: a × N² + b × N³, fitted to SmolLM2's 0.35 s a
# layer at 4,096 tokens and 1.44 s at 8,192 (its head mean and its product together; docs/speed.md). Past 8,192
# tokens an extrapolation: the product's share (∝ N³) grows.
LAYER_SECONDS = (0.020, 0.00015)


def rollout_seconds(run, layers: int) -> float:
    """About how long rolling out `layers` layers of `run` takes on 2 CPU cores (`LAYER_SECONDS`)."""
    thousands = run.n / 1000
    return layers * (LAYER_SECONDS[0] * thousands ** 2 + LAYER_SECONDS[1] * thousands ** 3)
