"""Head examples' score on a planted corpus (`mha_viz.corpus.examples`): rows that see fewer than
MIN_KEYS keys past the first are left out, so the second token attending to itself (which the old
max-activation rule ranked first every time) loses to a real previous-token pattern; a document's
score is the mean of its TOP_ROWS best rows, so one strong row does not decide it; and heads whose
best scores tie are ranked by the mean of their top scores. Every expected value is computed here
by hand from the planted weights."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.capture.run import AttentionRun
from mha_viz.corpus import HeadExamples
from mha_viz.corpus import examples as ex_mod

N = 10  # tokens a document: causal rows 4–9 see at least 4 keys past the first
ARTEFACT, PREVIOUS, ONE_ROW, SHORT = range(4)


def uniform(n: int) -> np.ndarray:
    """A causal head that spreads each row evenly over the keys it sees."""
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def previous_token(n: int) -> np.ndarray:
    """Row q ≥ 2 gives 0.6 + 0.03 q to key q − 1 and the rest to the first token (a sink)."""
    a = np.zeros((n, n))
    a[0, 0] = 1
    a[1, :2] = 0.5
    for q in range(2, n):
        a[q, q - 1] = 0.6 + 0.03 * q
        a[q, 0] = 1 - a[q, q - 1]
    return a


def with_self_artefact(a: np.ndarray) -> np.ndarray:
    """Row 1 puts everything on itself: weight 1 on the only key past the first it can see."""
    a = a.copy()
    a[1, :] = 0
    a[1, 1] = 1
    return a


def one_strong_row(n: int) -> np.ndarray:
    a = uniform(n)
    a[6] = 0
    a[6, 3], a[6, 0] = 0.95, 0.05
    return a


def planted() -> list[AttentionRun]:
    """Four causal documents, one layer, three heads. Head 0: the artefact beside uniform rows, a
    previous-token pattern, one strong row in uniform ones, and a document too short to score.
    Heads 1 and 2 share head 0's best document score (the previous-token document) but differ
    elsewhere: head 2 fires in every document, head 1 in that one only."""
    head0 = [with_self_artefact(uniform(N)), with_self_artefact(previous_token(N)), one_strong_row(N),
             with_self_artefact(previous_token(6))]
    head1 = [uniform(N), previous_token(N), uniform(N), uniform(6)]
    head2 = [previous_token(N), previous_token(N), previous_token(N), previous_token(6)]
    runs = []
    for heads in zip(head0, head1, head2):
        n = heads[0].shape[0]
        run = AttentionRun.from_array(np.stack(heads)[None], [f"t{i}" for i in range(n)], is_causal=True)
        run.token_ids = list(range(n))
        runs.append(run)
    return runs


def by_hand(a: np.ndarray) -> tuple[float, int]:
    """The documented score of one head on one causal document: rows q ≥ MIN_KEYS (row q sees q keys
    past the first), each row's largest weight past the first key, the mean of the TOP_ROWS best;
    and the best row."""
    rows = list(range(ex_mod.MIN_KEYS, a.shape[0]))
    row_scores = [max(a[q, 1:q + 1]) for q in rows]
    best = sorted(row_scores, reverse=True)[:ex_mod.TOP_ROWS]
    return sum(best) / len(best), rows[int(np.argmax(row_scores))]


@pytest.fixture(scope="module")
def examples() -> HeadExamples:
    part = ex_mod.ExamplesPartial(1, 3, ex_mod.ExampleOptions(top=4, per_decile=1))
    part.add_runs(planted(), range(4))
    return HeadExamples(part, 4)


def test_the_constants_are_the_documented_ones():
    """docs/head-metrics.md names these numbers; the planted documents below are built on them."""
    assert (ex_mod.MIN_KEYS, ex_mod.TOP_ROWS) == (4, 3)


def test_the_second_token_attending_to_itself_no_longer_wins(examples):
    runs = planted()
    old = [run.attentions[0, 0, 1:, 1:].max() for run in runs]  # the old rule: the largest weight past row/col 0
    assert old[ARTEFACT] == 1 and np.argmax(old) == ARTEFACT  # the artefact would win under it
    top = examples.top(0, 0)
    assert [d for d, _ in top] == [PREVIOUS, ONE_ROW, ARTEFACT]  # SHORT has too few rows to score
    for doc, score in top:
        want, query = by_hand(runs[doc].attentions[0, 0])
        assert score == pytest.approx(want, abs=1e-6)
        assert examples.query(doc, 0, 0) == query
    assert examples.query(PREVIOUS, 0, 0) == N - 1  # where the previous-token weight is largest
    assert top[0][1] == pytest.approx((0.87 + 0.84 + 0.81) / 3, abs=1e-6)
    assert examples.histogram(0, 0)[1].sum() == 3  # the short document counts nowhere


def test_one_strong_row_does_not_decide_a_documents_score(examples):
    """ONE_ROW holds the largest single weight of the counted rows (0.95 > 0.87) yet ranks below
    PREVIOUS, whose three best rows are all strong."""
    a = planted()[ONE_ROW].attentions[0, 0]
    assert a[ex_mod.MIN_KEYS:, 1:].max() == pytest.approx(0.95)
    scores = dict(examples.top(0, 0))
    assert scores[ONE_ROW] == pytest.approx((0.95 + 1 / 5 + 1 / 6) / 3, abs=1e-6)
    assert scores[ONE_ROW] < scores[PREVIOUS]
    assert examples.query(ONE_ROW, 0, 0) == 6


def test_rows_that_see_few_keys_are_left_out():
    keep = np.ones(8, dtype=bool)
    keep[0] = False
    assert np.flatnonzero(ex_mod.scored_rows(keep, causal=True)).tolist() == [4, 5, 6, 7]
    assert np.flatnonzero(ex_mod.scored_rows(keep, causal=False)).tolist() == list(range(1, 8))
    assert not ex_mod.scored_rows(keep[:4], causal=False).any()  # an encoder's 3 keys past the first
    keep[2] = False  # a special token: neither a row nor a key that counts
    assert np.flatnonzero(ex_mod.scored_rows(keep, causal=True)).tolist() == [5, 6, 7]


def test_heads_whose_best_scores_tie_rank_by_the_mean_of_their_top_scores(examples):
    best = examples.ranking("max")
    assert best[0, 1] == best[0, 2] == best[0, 0]  # planted: all three best on the previous-token document
    mean = examples.ranking()  # the default: the mean of the top scores
    np.testing.assert_allclose(mean, examples.ranking("top_mean"))
    assert mean[0, 2] > mean[0, 0] > mean[0, 1]
    assert examples.best_heads("max", k=3) == [(0, 2), (0, 0), (0, 1)]  # the tie broken by the mean
    assert examples.best_heads(k=3) == [(0, 2), (0, 0), (0, 1)]
    # under the old rule every head's best sat at exactly 1 (the planted artefact in head 0) or tied
    old = [max(run.attentions[0, h, 1:, 1:].max() for run in planted()) for h in range(3)]
    assert old[0] == 1


def test_a_partial_merge_keeps_each_documents_query(examples):
    runs = planted()
    options = ex_mod.ExampleOptions(top=4, per_decile=1)
    a, b = ex_mod.ExamplesPartial(1, 3, options), ex_mod.ExamplesPartial(1, 3, options)
    a.add_runs(runs[2:], [2, 3])
    b.add_runs(runs[:2], [0, 1])
    merged = HeadExamples(a.merge(b), 4)
    for head in range(3):
        assert merged.top(0, head) == examples.top(0, head)
        assert [merged.query(d, 0, head) for d, _ in merged.top(0, head)] == [
            by_hand(runs[d].attentions[0, head])[1] for d, _ in merged.top(0, head)]


def test_examples_saved_under_the_old_score_are_refused_with_a_reason(examples, tmp_path):
    """Files of the first format hold max-activation scores and no queries: read as they are, their
    documents would be ranked by another score; loading says to run the corpus again."""
    import json

    from mha_viz.corpus import examples_result

    folder = examples.save(tmp_path / "ex")
    back = HeadExamples.load(folder)
    assert back.top(0, 0) == examples.top(0, 0) and back.query(PREVIOUS, 0, 0) == N - 1
    meta = json.loads((folder / examples_result.META).read_text(encoding="utf-8"))
    meta["version"] = 1
    (folder / examples_result.META).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ValueError, match="another version of mha-viz.*run the corpus again"):
        HeadExamples.load(folder)
