"""*Hide tokens* and the contributions lens on a long run (`mha_viz.derived`, issue 52): the derived run equals
the dense transform of the dense run of the same text (`drop_tokens`, `as_contributions`) within 1e-5: its rows
through every method, its summary (head table, thumbnails, kept keys) and its `hidden`; the value norms made at
length (`capture.contributions.long_value_norms`) are the dense capture's."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.capture import head_rows, sinks
from mha_viz.capture.contributions import value_norms_of
from mha_viz.derived import run as derived
from mha_viz.interventions import attribution
from mha_viz.metrics import head_table
from mha_viz.views import detail, thumbnails
from tests.models.long_pairs import assert_same_rows, assert_same_table, dense_and_long

pytestmark = pytest.mark.model
N = 600
CASES = ("lens", "hidden", "both")


@pytest.fixture(scope="module", params=["minilm", "smollm2-6"])
def pair(request):
    """(model, dense run, long run) of the same N tokens."""
    return dense_and_long(request.param, N)


def _mask(run) -> np.ndarray:
    """The special tokens and the first token (MiniLM: [CLS] and [SEP]; SmolLM2: the first)."""
    return sinks.hide_mask(run, special=True, first=True)


@pytest.fixture(scope="module")
def transformed(pair):
    """case -> (dense transform of the dense run, derived long run), made as the sidebar makes them."""
    model, dense, long = pair
    with head_rows.forbid_dense():
        value_norms_of(long, model)
        hidden = derived.hide_tokens(long, _mask(long))
        out = {"hidden": (dense.drop_tokens(_mask(dense)), hidden),
               "lens": (attribution.as_contributions(dense), derived.contributions(long, long.value_norms))}
        kept = hidden.hidden.kept
        out["both"] = (attribution.as_contributions(out["hidden"][0]),
                       derived.contributions(hidden, long.value_norms[:, :, kept]))
    return out


def test_value_norms_at_length_are_the_dense_runs(pair):
    model, dense, long = pair
    with head_rows.forbid_dense():
        norms = value_norms_of(long, model)
    assert norms is long.value_norms and norms.shape == dense.value_norms.shape
    np.testing.assert_allclose(norms, dense.value_norms, rtol=1e-5, atol=1e-5)
    assert value_norms_of(long, model) is norms  # kept on the run: made once


@pytest.mark.parametrize("case", CASES)
def test_a_derived_runs_rows_are_the_dense_transforms(transformed, case):
    ref, ours = transformed[case]
    assert not ours.is_dense and ours.tokens == ref.tokens and ours.n == ref.n and ours.lens == ref.lens
    n = ref.n
    with head_rows.forbid_dense():
        assert_same_rows(ours, ref)
        for layer in (0, ref.num_layers - 1):
            head = (3 * layer + 1) % ref.num_heads
            got = head_rows.gather(ours.source, layer, [head, 0], 0, n, n, ref.num_heads)
            np.testing.assert_allclose(got, ref.attentions[layer, [head, 0]], atol=1e-5)


@pytest.mark.parametrize("case", CASES)
def test_a_derived_runs_summary_is_the_dense_transforms(transformed, case):
    ref, ours = transformed[case]
    assert_same_table(ours.summary.table, head_table(ref))
    with head_rows.forbid_dense():
        pooled = thumbnails.thumbnails(ours)
    np.testing.assert_allclose(pooled, detail.max_pool(ref.attentions, thumbnails.THUMB), atol=1e-5)
    for layer, head in ((0, 1), (ref.num_layers - 1, ref.num_heads - 1)):
        keys, weights = ours.summary.top(layer, head)
        a = ref.attentions[layer, head]
        held = keys >= 0
        np.testing.assert_allclose(weights[held], np.take_along_axis(a, np.where(held, keys, 0), -1)[held],
                                   atol=1e-5)
        expect = np.sort(a, -1)[:, ::-1][:, :keys.shape[1]]  # each row's heaviest weights, heaviest first
        strong = expect >= ours.summary.min_weight + 1e-5
        np.testing.assert_allclose(weights[strong], expect[strong], atol=1e-5)
        np.testing.assert_allclose(ours.summary.rest(layer, head) + weights.sum(-1), a.sum(-1), atol=1e-5)


@pytest.mark.parametrize("case", ("hidden", "both"))
def test_a_derived_runs_hidden_is_the_dense_ones(transformed, case):
    ref, ours = transformed[case]
    mine, theirs = ours.hidden, ref.hidden
    np.testing.assert_array_equal(mine.kept, theirs.kept)
    np.testing.assert_array_equal(mine.removed, theirs.removed)
    assert (mine.removed_tokens, mine.n_before, mine.label) == (theirs.removed_tokens, theirs.n_before, theirs.label)
    np.testing.assert_allclose(mine.mass, theirs.mass, atol=1e-5)
    np.testing.assert_array_equal(mine.empty, theirs.empty)
    assert int(theirs.kept[0]) != 0  # the first token hidden: the table's sink rule without one was checked


def test_a_derived_run_refuses_what_the_dense_one_does(pair):
    _model, _dense, long = pair
    with pytest.raises(ValueError, match="booleans"):
        derived.hide_tokens(long, np.zeros(3, dtype=bool))
    with pytest.raises(ValueError, match="every token"):
        derived.hide_tokens(long, np.ones(long.n, dtype=bool))
    with pytest.raises(ValueError, match="shape"):
        derived.contributions(long, np.ones((1, 1, 1), np.float32))
