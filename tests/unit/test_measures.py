"""The catalogue of measures (`mha_viz.metrics.measures`) against what is computed: the head table
and both ways of computing its statistics give the catalogue's measures, in its order; the
compiled pass writes every sum it names; every entropy uses the documented smoothing; the
comparison's columns are in every table and lie in 0..1; each `bounded` flag holds
on random runs; each measure's `needs` decides whether a run gets it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mha_viz import AttentionRun, metrics
from mha_viz.metrics import measures, row_table
from mha_viz.metrics.cross_attention import cross_stats
from mha_viz.metrics.head_stats import pattern_stats
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import DETECTORS, ROW_SUMS, TextFacts
from mha_viz.views import comparison
from tests.helpers import random_run

PATTERN_MEASURES = [name for name, m in metrics.METRICS.items() if m.needs == "attention"]


def _two_segments(rng, n: int) -> list[str]:
    """[CLS] … [SEP] … [SEP]: random words and punctuation between."""
    tokens = [str(rng.choice(["a", "b", ".", ","])) for _ in range(n)]
    tokens[0] = "[CLS]"
    if n >= 2:
        tokens[-1] = tokens[n // 2] = "[SEP]"
    return tokens


def _random_run(seed: int, L=2, H=3, n=9, causal=False) -> tuple[AttentionRun, dict]:
    """A run of random patterns over two segments, with head outputs, and random weights."""
    return random_run(L=L, H=H, n=n, causal=causal, seed=seed, tokens=_two_segments)


def test_both_paths_give_the_catalogues_pattern_measures_in_its_order():
    run, _ = _random_run(0)
    compiled, batched = pattern_stats(run, compiled=True), pattern_stats(run, compiled=False)
    assert list(compiled) == list(batched) == [*PATTERN_MEASURES, "in_segment"]
    detector_form = "Σ(A ⊙ P)/ΣA"  # TransformerLens' score
    scores = [name for name in PATTERN_MEASURES if metrics.METRICS[name].formula.startswith(detector_form)]
    assert list(DETECTORS) == scores
    assert list(metrics.detection_patterns(run)) == list(DETECTORS)


def test_the_head_table_has_every_measure_of_the_catalogue_in_its_order():
    run, weights = _random_run(1)
    table = metrics.head_table(run, weights)
    shown = [c for c in table.columns if c in metrics.METRICS]
    assert shown == list(metrics.METRICS)
    assert "in_segment" not in table.columns and "total" not in table.columns


def test_the_compiled_pass_writes_every_sum_it_names():
    """Every sum of ROW_SUMS is written where its name says (the measures of each name by hand: the head's
    total mass, the worst row's mass in its segment, the sink, the detector hits), and `finish` names each."""
    run, _ = _random_run(2, L=1, H=4, n=8)
    att = np.ascontiguousarray(run.attentions[0], dtype=np.float32)  # (4, 8, 8)
    att[1] *= 0.5  # a head whose rows sum to 1/2: its total differs from n
    ids = np.array([5, 1, 2, 7, 1, 2, 3, 7])
    sep, punct = np.zeros(8, np.float32), np.zeros(8, np.float32)
    sep[[3, 7]] = 1.0
    before = np.concatenate([[-1], ids[:-1]])  # the duplicate's and the induction's ids (match records 0 and 1)
    facts = TextFacts(8, False, 1, ids, np.stack([sep, punct]), np.stack([ids, before]), np.array([0] * 4 + [1] * 4),
                      row_table.TABLE)
    reducer = BlockSums(4, facts)
    reducer.add(att, 0, 0)
    sums = reducer.finish()[0]
    assert list(sums) == list(ROW_SUMS) and all(np.isfinite(v).all() for v in sums.values())
    a = att.astype(np.float64)
    np.testing.assert_allclose(sums["total"], a.sum((1, 2)), rtol=1e-6)
    same = facts.seg[:, None] == facts.seg[None, :]
    beyond = a[:, 1:, 1:] / a[:, 1:, 1:].sum(-1, keepdims=True)  # rows and keys after the sink, renormalised
    np.testing.assert_allclose(sums["in_segment"], (beyond * same[1:, 1:]).sum(-1).min(-1), rtol=1e-6)
    np.testing.assert_allclose(sums["beyond_sep"], beyond[:, :, [2, 6]].sum((1, 2)), rtol=1e-6)
    # the sink: the first key's mass and, for head 1, the half each row gave no key (a learned sink's share)
    np.testing.assert_allclose(sums["sink"], a[:, :, 0].sum(-1) + [0, 4, 0, 0], rtol=1e-6)
    np.testing.assert_allclose(sums["first"], a[:, :, 0].sum(-1), rtol=1e-6)
    np.testing.assert_allclose(sums["sep"], a[:, :, [3, 7]].sum((1, 2)), rtol=1e-6)
    np.testing.assert_allclose(sums["confidence"], a.max(-1).sum(-1), rtol=1e-6)
    rows, cols = np.array([4, 5, 7]), np.array([1, 2, 3])  # the earlier copies of ids 1, 2 and 7
    np.testing.assert_allclose(sums["duplicate_score"], a[:, rows, cols].sum(-1), rtol=1e-6)
    np.testing.assert_allclose(sums["induction_score"], a[:, rows, cols + 1].sum(-1), rtol=1e-6)


def test_the_entropy_smoothing_is_the_specs_and_every_entropy_uses_it():
    """The smoothing of `docs/head-metrics.md`, section 1, Â = 0.9999·A + 0.0001/k: in the
    catalogue's formula, and the same entropies from the head table's two paths and the
    cross-attention metrics on one square pattern (each against those constants written out here)."""
    assert "Â = 0.9999·A + 0.0001/k_i" in metrics.METRICS["entropy"].formula
    # the JS divergence's own smoothing (its values against section 2's: tests/unit/test_js_fast.py)
    assert "Ã = 0.999·A + 0.001/n" in metrics.SIMILARITIES["js"].formula
    run, _ = _random_run(3, n=7)
    smooth = 0.9999 * run.attentions.astype(np.float64) + 0.0001 / 7
    by_hand = -(smooth * np.log(smooth)).sum(-1).mean(-1)  # (L, H)
    for compiled in (True, False):
        np.testing.assert_allclose(pattern_stats(run, compiled=compiled)["entropy"], by_hand, rtol=1e-6)
    np.testing.assert_allclose(cross_stats(run.attentions)["entropy"], by_hand, rtol=1e-12)


def test_the_comparisons_columns_are_in_every_table_and_lie_in_0_to_1():
    """The "metrics" change averages CHANGE_COLUMNS as differences within 0..1: each is a column of
    the head table (metric_change skips a missing one silently) and never leaves 0..1 on random and
    planted heads; an unbounded measure (entropy, distance, output norms) stands in by its bounded form."""
    tables = _tables(7)
    for table in tables:
        assert set(comparison.CHANGE_COLUMNS) <= set(table.columns)
    values = pd.concat([t[list(comparison.CHANGE_COLUMNS)] for t in tables])
    assert ((values >= -1e-6) & (values <= 1 + 1e-6) | values.isna()).all().all(), values.describe()
    for name, m in metrics.METRICS.items():
        assert not (m.bounded and m.bounded_form), name  # one or the other
        assert not m.bounded_form or m.bounded_form in tables[0].columns, name
        assert (name in comparison.CHANGE_COLUMNS) == m.bounded, name


def _tables(seed: int) -> list:
    """Head tables of random runs (peaked to flat, causal or not, 1 to 12 tokens, one or two
    segments, large weights) and of planted heads (one-hot on the last key, uniform)."""
    rng = np.random.default_rng(seed)
    tables = []
    for k in range(12):
        n = int(rng.integers(1, 13))
        run, weights = _random_run(seed * 100 + k, L=1, H=3, n=n, causal=bool(k % 2))
        a = rng.random(run.attentions.shape) ** float(rng.choice([1.0, 4.0, 12.0]))
        a = np.tril(a) if run.is_causal else a
        run.attentions = (a / a.sum(-1, keepdims=True)).astype(np.float32)
        tables.append(metrics.head_table(run, {k: w if k == "copying" else 3 * w for k, w in weights.items()}))
    n = 10
    far = np.zeros((n, n))
    far[:, -1] = 1.0  # every query on the last key
    planted, weights = _random_run(seed, L=1, H=2, n=n)
    planted.attentions = np.stack([far, np.full((n, n), 1 / n)])[None].astype(np.float32)
    tables.append(metrics.head_table(planted, weights))
    return tables


def test_each_measures_bounded_flag_matches_its_range_on_random_runs():
    """A bounded measure (and a bounded form) stays in 0..1 on every run; one that is not goes
    past 1 on some run (so the flag is not merely missing)."""
    tables = _tables(5)
    for name, m in metrics.METRICS.items():
        for column, bounded in ((name, m.bounded), (m.bounded_form, True)):
            if not column:
                continue
            values = np.concatenate([t[column].to_numpy(np.float64) for t in tables])
            values = values[np.isfinite(values)]
            assert values.size > 30, column
            if m.signed and column == name:
                assert values.min() >= -1 and values.max() <= 1 and values.min() < 0, (column, values.min())
            elif bounded:
                assert values.min() >= -1e-6 and values.max() <= 1 + 1e-6, (column, values.min(), values.max())
            else:
                assert values.max() > 1.5, (column, values.max())


def test_needs_decides_which_measures_a_run_gets():
    """A run gets the catalogue's measures whose `needs` it meets, in the catalogue's order: without head outputs
    or without weights none of those that need them (written out here from each `needs`); and a measure whose
    `needs` names a part no run has (planted in a copy of the catalogue) is left out of every table."""
    run, weights = _random_run(6)
    bare, _ = _random_run(6)
    bare.head_outputs = None
    for r, w, has in ((run, weights, {"outputs", "weights"}), (run, None, set()), (bare, weights, {"weights"}),
                      (bare, None, set())):
        table = metrics.head_table(r, w)
        want = [name for name, m in metrics.METRICS.items() if set(m.needs.split("+")) - {"attention"} <= has]
        assert [c for c in table.columns if c in metrics.METRICS] == want
        assert metrics.metrics_for(outputs=r.head_outputs is not None, weights=w is not None) == want
    assert metrics.needing("outputs") == ["output_norm", "mean_output_norm"]
    planted = dict(metrics.METRICS, mean_output_norm=dataclasses.replace(
        metrics.METRICS["mean_output_norm"], needs="outputs+weights+gradients"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(measures, "METRICS", planted)
        table = metrics.head_table(run, weights)
    assert "output_norm" in table.columns and "mean_output_norm" not in table.columns
