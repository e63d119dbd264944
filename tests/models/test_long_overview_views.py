"""The overview views of a long run (`analyze(dense=False)`: no every-head array) against the dense run of the
same text (issue 52's fidelity, at 600 tokens): the Model view's thumbnails are the dense run's max-pooled on
the same bins, the head table and the head types are the dense run's (the output-based columns absent),
Token focus reads exact rows and an exact column for its strongest head and otherwise each query's kept keys
with their exact weights, and every head ranked by a pair of tokens is the dense ranking up to ties; all of
it without ever building every head (`forbid_dense`)."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import figures
from mha_viz.capture import head_rows, sinks
from mha_viz.circuits.composition import table_weights
from mha_viz.export import report
from mha_viz.metrics import head_table
from mha_viz.metrics.measures import METRICS, needing
from mha_viz.views import detail, focus, thumbnails, token_pair
from tests.helpers import decode
from tests.models import architectures_2026
from tests.models.long_pairs import TEXT, dense_and_long
from tests.tolerance import assert_same_ranking

pytestmark = pytest.mark.model
N = 600
TOL = 1e-5


@pytest.fixture(scope="module", params=["minilm", "smollm2-6"])
def runs(request):
    """(model, dense run, long run) of the same N tokens."""
    model, dense, long = dense_and_long(request.param, N)
    assert long.n == dense.n > 400
    return model, dense, long


def test_the_thumbnails_are_the_dense_runs_pooled_on_the_same_bins(runs):
    _model, dense, long = runs
    with head_rows.forbid_dense():
        ours = thumbnails.thumbnails(long)
        assert ours is long.summary.pooled
        assert sinks.learned_sink_share(long) is None  # rows that sum to 1: no learned sink
    reference = detail.max_pool(dense.attentions, thumbnails.THUMB)
    assert ours.shape == reference.shape == (dense.num_layers, dense.num_heads, 48, 48)
    np.testing.assert_allclose(ours, reference, atol=TOL)
    assert not long.is_dense


def test_the_head_table_and_types_are_the_dense_runs(runs):
    model, dense, long = runs
    weights = table_weights(model)
    with head_rows.forbid_dense():
        ours = head_table(long, weights)
        types = figures.head_types(long, table=ours)
    ref = head_table(dense, weights)
    assert set(ref.columns) - set(ours.columns) <= set(needing("outputs"))  # the output-based ones only
    assert set(ours.columns) <= set(ref.columns)
    for column in ours.columns:
        if column == "pattern":
            assert ours[column].tolist() == ref[column].tolist()
            continue
        bounded = column in METRICS and METRICS[column].bounded  # entropy in nats, distance in tokens: relative
        np.testing.assert_allclose(ours[column].to_numpy(float), ref[column].to_numpy(float), atol=TOL,
                                   rtol=0 if bounded else TOL, err_msg=column, equal_nan=True)
    reference = figures.head_types(dense, table=ref)
    assert types.data[0].z.tolist() == reference.data[0].z.tolist()
    assert list(types.data[1].text) == list(reference.data[1].text)


def _check_columns(f: focus.Focus, dense, index: int) -> None:
    """A long run's *attended by* of token `index`: the exact head's column exact, every other value the
    dense weight where it is kept and 0 where it is not: below the kept threshold, or not among its row's
    heaviest keys."""
    a = dense.attentions
    exact = a[..., :, index]
    layer, head = f.exact_head
    np.testing.assert_allclose(f.attended_by[layer, head], exact[layer, head], atol=TOL)
    kept = f.attended_by > 0
    np.testing.assert_allclose(f.attended_by[kept], exact[kept], atol=TOL)
    k8 = np.sort(a, axis=-1)[..., -8]  # each row's 8th heaviest weight
    missed = ~kept & (exact > 0.005 + TOL)
    missed[layer, head] = False
    assert (exact[missed] <= k8[missed] + TOL).all()  # counted as 0 only outside the row's kept keys


def test_token_focus_reads_rows_and_a_column_exactly_and_kept_keys_otherwise(runs):
    _model, dense, long = runs
    n, a = dense.n, dense.attentions
    for index in (0, n // 3, n - 1):
        with head_rows.forbid_dense():
            f = focus.focus(long, index)
        assert focus.focus(dense, index).by_exact and not f.by_exact and f.exact_head is not None
        np.testing.assert_allclose(f.attends_to, a[:, :, index, :], atol=TOL)
        _check_columns(f, dense, index)
    words = np.array([[detail.word_level(a[layer, head], dense.word_ids) for head in range(dense.num_heads)]
                      for layer in range(dense.num_layers)])  # (L, H, W, W): each head's words level
    pieces = [w for w, group in enumerate(detail.word_groups(dense.word_ids)) if len(group) > 1]
    assert pieces  # a word of several tokens: its pieces' kept weights summed
    for w in (1, words.shape[-1] // 2, pieces[0], pieces[-1]):
        with head_rows.forbid_dense():
            f = focus.focus(long, w, words=True)
        assert f.labels == detail.word_labels(dense.tokens, dense.word_ids)
        np.testing.assert_allclose(f.attends_to, words[:, :, w, :], atol=TOL)
        layer, head = f.exact_head
        np.testing.assert_allclose(f.attended_by[layer, head], words[layer, head, :, w], atol=TOL)
        assert (f.attended_by <= words[..., :, w] + TOL).all()  # the kept pieces' weights: never more
        np.testing.assert_allclose(focus.focus(dense, w, words=True).attended_by, words[..., :, w], atol=TOL)


def _pair_weights(dense, query: int, key: int, words: bool) -> np.ndarray:
    """(layers, heads): A[l, h, query, key] from the dense array, or from each head's words level."""
    if not words:
        return dense.attentions[:, :, query, key]
    return np.array([[detail.word_level(dense.attentions[layer, head], dense.word_ids)[query, key]
                      for head in range(dense.num_heads)] for layer in range(dense.num_layers)])


def test_heads_from_tokens_rank_as_the_dense_run(runs):
    _model, dense, long = runs
    n = dense.n
    for query, key, words in ((n - 1, 0, False), (n // 2, n // 2 - 1, False), (n // 3, n // 3, False),
                              (40, 10, True)):
        with head_rows.forbid_dense():
            ours = token_pair.heads_from_tokens(long, query, key, words=words)
        scores = _pair_weights(dense, query, key, words)
        flat = [h.layer * dense.num_heads + h.head for h in ours]
        assert_same_ranking(flat, np.argsort(-scores.ravel(), kind="stable"), scores, TOL,
                            f"{query} -> {key}, words={words}")
        np.testing.assert_allclose([h.weight for h in ours], scores.ravel()[flat], atol=TOL)


def test_the_report_of_a_long_run_draws_the_scans_overview_and_table(runs):
    _model, dense, long = runs
    with head_rows.forbid_dense():  # the thumbnails and the table are the scan's, one head recomputed
        page = report.html_report(long, heads=[(1, 2)], table=head_table(long))
    assert report.embedded_json(page, "fig-overview")["data"][0]["source"].startswith("data:image/png")
    ours = decode(report.embedded_json(page, "fig-head-0"))["data"][0]["z"]
    theirs = decode(report.embedded_json(report.html_report(dense, heads=[(1, 2)]), "fig-head-0"))["data"][0]["z"]
    np.testing.assert_allclose(np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float), atol=TOL)
    assert f"Head metrics ({dense.num_layers * dense.num_heads} rows)" in page


def test_a_learned_sinks_share_on_a_long_run_is_the_dense_runs(tmp_path):
    model = mha_viz.load_model(str(architectures_2026.build("gpt_oss", tmp_path / "gpt_oss")), device="cpu")
    text = TEXT[:1500]
    dense = mha_viz.analyze(model, text, dense=True)
    long = mha_viz.analyze(model, text, dense=False)
    reference = sinks.learned_sink_share(dense)
    with head_rows.forbid_dense():
        ours = sinks.learned_sink_share(long)
    assert reference is not None and ours is not None and float(reference.max()) > 0.01
    np.testing.assert_allclose(ours, reference, atol=TOL)
