"""Which heads of an explanation (`prediction.Explanation`) lead each of its grids: the head a new pair opens on,
the top head of each grid in words, and how the estimate agrees with real patching in words."""

from __future__ import annotations

import numpy as np

from mha_viz.interventions import estimate, prediction


def top_head(expl: prediction.Explanation) -> tuple[int, int]:
    """The head a new pair's panel opens on: the largest estimated restored fraction, else the largest
    real one, else the largest direct effect."""
    grid = expl.estimated if expl.estimate is not None else (
        expl.patching.restored if expl.patching is not None else np.abs(expl.dla.per_head))
    return argmax(grid)


def argmax(grid: np.ndarray) -> tuple[int, int]:
    at = np.unravel_index(int(np.argmax(grid)), grid.shape)
    return int(at[0]), int(at[1])


def agreement_text(expl: prediction.Explanation, agree) -> str:
    def value(v: float) -> str:
        return f"{v:.3f}" if np.isfinite(v) else "undefined (one side is constant)"
    count = int(agree.differ.sum())
    differ = {0: "No head differs", 1: "1 head differs (ringed on both grids)"}.get(
        count, f"{count} heads differ (ringed on both grids)")
    return (f"Estimate against real patching over the {expl.estimated.size} heads: Pearson r = {value(agree.pearson)}, "
            f"Spearman ρ = {value(agree.spearman)}. {differ} by more than {estimate.DISAGREE} of the gap; the largest "
            f"difference is {agree.largest:.3f}, at layer {expl.clean.layer_ids[agree.where[0]]}, "
            f"head {agree.where[1]}.")


def top_heads_text(expl: prediction.Explanation) -> str:
    """The top head of each grid on the page: the estimate's, real patching's (or that it has not
    run) and the largest direct effect, by the model's layer numbers."""
    ids, d = expl.clean.layer_ids, expl.dla

    def named(what: str, at: tuple[int, int], value: str) -> str:
        return f"{what}: layer {ids[at[0]]}, head {at[1]} ({value})"
    parts = []
    est_at = None if expl.estimate is None else argmax(expl.estimated)
    if est_at is not None:
        parts.append(named("Largest estimated restored fraction", est_at, f"{float(expl.estimated[est_at]):.2f}"))
    if expl.patching is not None:
        at = argmax(expl.patching.restored)
        real = named("largest patched for real", at, f"{float(expl.patching.restored[at]):.2f}")
        if at == est_at:
            real += ", the same head"
        parts.append(real)
    elif est_at is not None:
        parts.append("real patching has not run yet")
    at = argmax(np.abs(d.per_head))
    parts.append(named("largest direct effect", at, f"{float(d.per_head[at]):+.2f}"))
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:]
