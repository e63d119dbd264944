"""Head types beyond the sink (`docs/head-metrics.md`, section 1): a planted head of every class gets
its class; a sink head beside a previous-token head gets "sink" and "diagonal:prev"; a head mostly on
the sink (or on a learned sink) is typed by what it does beyond it, with the sink's share in its own
column worked out by hand; the measures beyond the sink equal the head table of the same run with its
first token hidden (`drop_tokens`, which renormalises on its own)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mha_viz import AttentionRun
from mha_viz.capture import sinks
from mha_viz.metrics.head_stats import pattern_columns, pattern_stats


def _table(*heads, tokens=None, causal=False, special=None, compiled=True):
    a = np.stack(heads)[None].astype(np.float32)  # (1, H, n, n)
    n = a.shape[-1]
    run = AttentionRun(tokens=tokens or [f"w{i}" for i in range(n)], attentions=a, is_causal=causal,
                       special_mask=special or [])
    stats = pattern_stats(run, compiled=compiled)  # the head table's columns, by the path asked for
    return pd.DataFrame(pattern_columns(stats, run.layer_ids, n))


def _sink_beside_prev(n):
    """Causal: head 0 all on the first token; head 1 on the previous token (row 0 on itself, the first)."""
    sink = np.zeros((n, n))
    sink[:, 0] = 1.0
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0
    return sink, prev


@pytest.mark.parametrize("compiled", [True, False])
def test_a_sink_head_beside_a_previous_token_head(compiled):
    """Not "vertical:first" twice: the sink head is "sink", the other "diagonal:prev". The sink column is
    the attention the type left out: all of head 0; head 1's rows 0 and 1, whose key is the first token."""
    n = 8
    table = _table(*_sink_beside_prev(n), causal=True, compiled=compiled)
    assert table["pattern"].tolist() == ["sink", "diagonal:prev"]
    assert table["sink"].tolist() == pytest.approx([1.0, 2 / n])
    assert np.isnan(table.loc[0, "beyond_prev"])  # no row keeps anything beyond the sink
    assert table.loc[1, "beyond_prev"] == pytest.approx(1.0)  # rows 2 … n − 1 (row 1 sees only itself beyond)
    assert table.loc[1, "prev"] == pytest.approx((n - 1) / n)


def test_a_head_mostly_on_the_sink_is_typed_by_what_it_does_beyond_it():
    """0.9 of every row on the first token and 0.1 on the previous one: "diagonal:prev", sink 0.9
    (row 0 of a causal run sees only the first token: all its attention is the sink's)."""
    n = 10
    a = np.zeros((n, n))
    a[:, 0] = 0.9
    a[np.arange(1, n), np.arange(n - 1)] += 0.1
    a[0, 0] = 1.0
    table = _table(a, causal=True)
    row = table.iloc[0]
    assert row.pattern == "diagonal:prev"
    assert row.sink == pytest.approx((1.0 + 1.0 + 0.9 * (n - 2)) / n)  # row 1's previous token is the first
    assert row.beyond_prev == pytest.approx(1.0) and row.first == pytest.approx(row.sink)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_learned_sinks_share_is_left_out_and_counted(compiled):
    """GPT-OSS's learned sink takes 1 − Σ_j A_ij of a row: a head whose rows keep 0.3, all on the previous
    token, is "diagonal:prev" with sink 0.7 (+ the first token's); one whose rows keep 0.2 spread evenly
    is "sink" (broad beyond it, nothing clear)."""
    n = 9
    prev = np.eye(n, k=-1) * 0.3
    prev[0, 0] = 0.3
    ones = np.tril(np.ones((n, n)))
    spread = ones / ones.sum(-1, keepdims=True) * 0.2
    table = _table(prev, spread, causal=True, compiled=compiled)
    assert table["pattern"].tolist() == ["diagonal:prev", "sink"]
    assert table.loc[0, "sink"] == pytest.approx(0.7 + 2 * 0.3 / n, rel=1e-6)  # rows 0, 1: their 0.3 on the first
    assert table.loc[1, "sink"] == pytest.approx(0.8 + 0.2 * np.mean(1 / np.arange(1, n + 1)), rel=1e-6)
    assert table.loc[1, "beyond_norm_entropy"] == pytest.approx(1.0, rel=1e-4)


def test_a_planted_head_of_every_class():
    """[CLS] words . words , words [SEP]: one planted head for each class; the block head in a run of two
    segments ([SEP] in the middle too), where the identity head is a block as well."""
    tokens = ["[CLS]", "a", "b", ".", "c", "x", "d", "e", ",", "f", "[SEP]"]
    special = [t.startswith("[") for t in tokens]
    n = len(tokens)
    seg = np.array([0] * 6 + [1] * 5)
    heads = {}
    heads["diagonal:self"] = np.eye(n)
    heads["diagonal:prev"] = np.eye(n, k=-1) + np.eye(n, k=-1).sum(1, keepdims=True).__rsub__(1) * np.eye(n)
    heads["diagonal:next"] = np.eye(n, k=1) + np.eye(n, k=1).sum(1, keepdims=True).__rsub__(1) * np.eye(n)
    to_sep, to_punct = np.zeros((n, n)), np.zeros((n, n))
    to_sep[:, 10] = 1.0
    to_punct[:, 3] = 1.0
    heads["vertical:sep"], heads["vertical:punct"] = to_sep, to_punct
    block = (seg[:, None] == seg[None, :]).astype(float)
    block[:, 0] = 0.0  # the sink left aside: the block is what lies beyond it
    block[0, 1] = 1.0
    two = [*tokens[:5], "[SEP]", *tokens[6:]]
    for compiled in (True, False):
        table = _table(block / block.sum(-1, keepdims=True), np.eye(n), tokens=two,
                          special=[t.startswith("[") for t in two], compiled=compiled)
        assert table["pattern"].tolist() == ["block", "block"]
    heads["broad"] = np.ones((n, n))
    sink = np.full((n, n), 0.02)
    sink[:, 0] = 1.0
    heads["sink"] = sink
    # half on the sink, 0.2 on the previous token, the rest spread: heterogeneous beyond the sink
    mixed = np.full((n, n), 0.3 / (n - 3))
    mixed[:, 0] = 0.5
    mixed[np.arange(1, n), np.arange(n - 1)] = 0.2
    heads["mixed:sink+prev"] = mixed
    # each row one-hot on a far key, no two rows alike: a content head with no positional share
    far = np.zeros((n, n))
    far[np.arange(n), [6, 7, 9, 1, 2, 1, 2, 4, 1, 2, 4]] = 1.0
    heads["heterogeneous"] = far
    a = np.stack([h / h.sum(-1, keepdims=True) for h in heads.values()])
    for compiled in (True, False):
        table = _table(*a, tokens=tokens, special=special, compiled=compiled)
        assert table["pattern"].tolist() == list(heads), compiled


@pytest.mark.parametrize("causal", [False, True])
def test_the_measures_beyond_the_sink_are_those_of_the_run_with_its_first_token_hidden(causal):
    """`drop_tokens` takes the first token out of both axes and renormalises each row (D): the full run's
    measures beyond the sink are D's, on both paths, over D's rows that see two keys or more (a causal
    D's row 0 sees one: no choice, left out; its normalised entropy already leaves it out). A run whose
    first token is hidden has no sink left to leave out: its beyond measures are D's too."""
    rng = np.random.default_rng(4)
    n = 12
    a = rng.random((2, 3, n, n)) ** 6 + 1e-3
    a[:, :, :, 0] += 3.0 * rng.random((2, 3, 1))  # sinks of different strengths
    if causal:
        a = np.tril(a)
    a = (a / a.sum(-1, keepdims=True)).astype(np.float32)
    tokens = ["[CLS]", "a", ".", "b", "c", ",", "[SEP]", "a", "d", ".", "e", "[SEP]"]
    run = AttentionRun(tokens=tokens, attentions=a, is_causal=causal, special_mask=[t[0] == "[" for t in tokens])
    hidden = run.drop_tokens(sinks.hide_mask(run, first=True))
    assert hidden.hidden.num_empty == 0
    d = hidden.attentions.astype(np.float64)  # (2, 3, m, m)
    m = n - 1
    rows = np.arange(1 if causal else 0, m)  # D's rows with a choice
    marks = [np.array([t == "[SEP]" for t in hidden.tokens]), np.array([t in ".," for t in hidden.tokens])]
    want = {"self": d[..., rows, rows].mean(-1), "prev": d[..., rows[rows > 0], rows[rows > 0] - 1].sum(-1) / len(rows),
            "next": d[..., rows[rows < m - 1], rows[rows < m - 1] + 1].sum(-1) / len(rows),
            "sep": d[..., rows, :][..., marks[0]].sum(-1).mean(-1),
            "punct": d[..., rows, :][..., marks[1]].sum(-1).mean(-1),
            "norm_entropy": pattern_stats(hidden, compiled=True)["norm_entropy"]}
    for compiled in (True, False):
        full, own = pattern_stats(run, compiled=compiled), pattern_stats(hidden, compiled=compiled)
        for name, value in want.items():
            np.testing.assert_allclose(full[f"beyond_{name}"], value, rtol=2e-6, atol=1e-7, err_msg=name)
            np.testing.assert_allclose(own[f"beyond_{name}"], value, rtol=2e-6, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(full["sink"], a[..., 0].mean(-1), rtol=1e-6)
        np.testing.assert_allclose(own["sink"], 0.0, atol=1e-6)  # renormalised rows: no sink left
        assert (full["beyond_prev"] != full["prev"]).all()  # the sink mattered
