"""The one progress protocol told the time left (`progress.with_time_left`): on a clock set by hand, the first
report is a warm-up (no pace yet), later ones say the time left from the pace of the fraction done since it, the
fractions reach the callback unchanged (clamped to 0 … 1), and the end says it is finishing."""

from __future__ import annotations

from mha_viz.progress import with_time_left


def test_the_time_left_follows_the_pace_after_the_first_report():
    now = [100.0]
    seen: list[tuple[float, str]] = []
    told = with_time_left(lambda f, m: seen.append((f, m)), clock=lambda: now[0])
    told(0.25, "Pair 1 of 4")  # the warm-up: a model's first call
    now[0] += 10.0
    told(0.5, "Pair 2 of 4")  # 0.25 more in 10 s: 0.5 left takes 20 s
    now[0] += 30.0
    told(0.75, "Pair 3 of 4")  # 0.5 in 40 s since the warm-up: 0.25 left takes 20 s
    told(1.2, "Pair 4 of 4")
    assert seen == [(0.25, "Pair 1 of 4 · estimating the time left…"), (0.5, "Pair 2 of 4 · about 20 s left"),
                    (0.75, "Pair 3 of 4 · about 20 s left"), (1.0, "Pair 4 of 4 · finishing…")]
