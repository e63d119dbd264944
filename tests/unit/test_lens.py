"""The contributions lens (`attribution.as_contributions`, `lens_divergence`) on planted runs:
values computed by hand, the order of *Hide tokens* and the lens, and the titles that say so."""

import dataclasses

import numpy as np
import pytest

from mha_viz import AttentionRun
from mha_viz.drawing import focus as focus_figures
from mha_viz.drawing import heads as head_figures
from mha_viz.features.lines import figures as line_figures
from mha_viz.interventions import attribution
from mha_viz.text.tokenize import InputError
from mha_viz.views import focus

LABEL = "value-weighted (‖α f(x)‖, row-normalised)"


def _run(norms=None, causal=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random((2, 3, 5, 5)).astype(np.float32) + 0.05
    if causal:
        a = np.tril(a)
    a /= a.sum(-1, keepdims=True)
    run = AttentionRun.from_array(a, ["[CLS]", "the", "cat", ".", "[SEP]"], is_causal=causal)
    run.special_mask = [True, False, False, False, True]
    run.value_norms = (rng.random((2, 3, 5)).astype(np.float32) * 3 + 0.1) if norms is None else norms
    return run


def test_contributions_by_hand():
    run = _run()
    out = attribution.as_contributions(run)
    layer, h, i = 1, 2, 3
    row = run.attentions[layer, h, i] * run.value_norms[layer, h]
    np.testing.assert_allclose(out.attentions[layer, h, i], row / row.sum(), rtol=1e-6)
    np.testing.assert_allclose(out.attentions.sum(-1), 1.0, atol=1e-6)
    assert out.lens == LABEL and run.lens == ""  # the weights' run is untouched
    assert out.attentions is not run.attentions


def test_a_token_that_writes_nothing_gets_nothing():
    norms = np.ones((2, 3, 5), dtype=np.float32)
    norms[..., 0] = 0.0  # [CLS] writes nothing through any head: looked at, moves nothing
    out = attribution.as_contributions(_run(norms))
    assert (out.attentions[..., 0] == 0).all()
    assert (out.attentions[..., 1:] > 0).all()


def test_causal_zeros_stay():
    out = attribution.as_contributions(_run(causal=True))
    assert not np.triu(out.attentions, 1).any()
    assert out.attentions[0, 0, 0, 0] == pytest.approx(1.0)


def test_hide_then_weigh_equals_weigh_then_hide():
    """Renormalising is scale-free per row: the two orders give the same picture."""
    run = _run()
    mask = np.array(run.special_mask)
    a = attribution.as_contributions(run.drop_tokens(mask))
    b = attribution.as_contributions(run).drop_tokens(mask)
    np.testing.assert_allclose(a.attentions, b.attentions, atol=1e-6)
    assert a.tokens == ["the", "cat", "."]


def test_no_value_path_is_refused_with_a_message():
    run = _run()
    run.value_norms = None
    with pytest.raises(InputError, match="value path"):
        attribution.as_contributions(run)


def test_divergence_zero_when_every_key_writes_alike():
    run = _run(np.full((2, 3, 5), 2.5, dtype=np.float32))
    js = attribution.lens_divergence(run, attribution.as_contributions(run))
    assert js.shape == (2, 3) and np.abs(js).max() < 1e-7


def test_divergence_by_hand():
    run = _run()
    out = attribution.as_contributions(run)
    js = attribution.lens_divergence(run, out)
    p, q = run.attentions[0, 1].astype(np.float64), out.attentions[0, 1].astype(np.float64)
    m = (p + q) / 2
    kl = lambda x, y: (x * np.log2(x / y)).sum(-1)  # noqa: E731 - every entry is positive here
    want = ((kl(p, m) + kl(q, m)) / 2).mean()
    assert js[0, 1] == pytest.approx(want, rel=1e-5)
    assert 0 < js.min() and js.max() <= 1


def test_divergence_skips_empty_rows():
    run = _run()
    out = attribution.as_contributions(run)
    a = run.attentions.copy()
    a[0, 0, 2] = 0  # a row hidden tokens left empty
    empty = dataclasses.replace(run, attentions=a)
    c = out.attentions.copy()
    c[0, 0, 2] = 0
    js = attribution.lens_divergence(empty, dataclasses.replace(out, attentions=c))
    full = attribution.lens_divergence(run, out)
    rows = [i for i in range(5) if i != 2]
    p, q = run.attentions[0, 0, rows].astype(np.float64), out.attentions[0, 0, rows].astype(np.float64)
    m = (p + q) / 2
    want = (((p * np.log2(p / m)).sum(-1) + (q * np.log2(q / m)).sum(-1)) / 2).mean()
    assert js[0, 0] == pytest.approx(want, rel=1e-5)
    assert js[0, 1] == pytest.approx(full[0, 1])


def test_every_view_titles_the_lens():
    out = attribution.as_contributions(_run())
    titles = [
        head_figures.head_heatmap(out, 0, 1).layout.title.text,
        head_figures.head_pooled(out, 0, 1).layout.title.text,
        head_figures.model_grid(out).layout.title.text,
        line_figures.line_figure(out, 0, [0, 1]).layout.title.text,
        focus_figures.focus_grid(focus.focus(out, 2), focus.TO, out.layer_ids).layout.title.text,
    ]
    assert all(LABEL in t.replace("<br>", " ") for t in titles), titles  # a long title wraps at a phrase
    weights = _run()
    assert LABEL not in head_figures.head_heatmap(weights, 0, 1).layout.title.text
    assert head_figures.model_grid(weights).layout.title.text is None
