"""Head statistics over a corpus (`mha_viz.corpus`, local engine) against the per-text head
table: means, stds, majority classes and pattern cosines equal the average over texts run one
by one (the classes up to documents within a padded batch's rounding of a rule's threshold);
padding, batch size and merge order change nothing; results survive save / load; progress and
Cancel work."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import mha_viz
from mha_viz import corpus, metrics
from mha_viz.budget.time_left import ESTIMATING, FINISHING
from mha_viz.corpus import importance
from tests.helpers import assert_corpus_patterns, class_inputs, corpus_voters

ENGLISH = [
    "The cat sat on the mat.",
    "Where did you leave the keys to the shed?",
    "Alice gave Bob the book because she had read it.",
    "one two three four five six seven eight nine ten",
    "The red door, the red door, the red door opened at last.",
    "Hi.",
    "x = [n for n in numbers if n % 2 == 0]",
    "The keys that the old gardener left on the table are missing.",
    "Buy eggs, flour, butter, two lemons and honey.",
    "Why?",
    "The river rose three metres overnight. By morning the fields were under water.",
    "A B C A B C",
]
LETTERS = [  # toy-induction reads lowercase letters; repeats give its induction head work
    "a b c d a b c d", "q w e r t y q w e r t y", "m", "z y x", "h e l l o h e l l o",
    "a b c d e f g h i j k l m n o p", "k k k k", "p q r s t p q r s t u v", "b a", "c o d e c o d e",
]
MODELS = [pytest.param("minilm", ENGLISH, marks=pytest.mark.model, id="minilm"),
          pytest.param("smollm2", ENGLISH[:6], marks=pytest.mark.model, id="smollm2"),  # GQA, RoPE, 30 layers
          pytest.param("toy", LETTERS, id="toy-induction"),
          pytest.param("tiny_gpt2", ENGLISH, id="tiny_gpt2")]
MAX_TOKENS = 32


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def _one_by_one(model, texts):
    """Each text's head table and pattern cosines, from `analyze` alone."""
    weights = corpus.model_weights(model)
    runs = [mha_viz.analyze(model, t, max_tokens=MAX_TOKENS) for t in texts]
    return runs, [metrics.head_table(r, weights) for r in runs], [metrics.head_similarity(r, "cosine") for r in runs]


def _rounding(model) -> float:
    """How far a padded batch's statistics of a text may lie from the text's own, run alone: float32 rounding
    of batched products, growing with depth (1.4e-5 at layer 29 of smollm2)."""
    return 1e-5 * max(1, model.num_layers // 6)


@pytest.mark.parametrize("name, texts", MODELS)
def test_corpus_means_stds_and_classes_equal_the_per_text_average(request, name, texts):
    model = request.getfixturevalue(name)
    stats = corpus.head_statistics(model, texts, batch_size=5, max_tokens=MAX_TOKENS, importance=False)
    runs, tables, sims = _one_by_one(model, texts)
    columns = [c for c in tables[0].columns if c not in ("layer", "head", "pattern")]
    assert columns and set(columns) <= set(stats.table.columns)
    assert stats.metric_columns == columns
    if model.has_head_outputs:
        assert "output_norm" in columns
    for c in columns:
        values = np.stack([t[c].to_numpy() for t in tables])  # (docs, L·H)
        # 1e-5, relative for large values (output norms of ~14 on 30-layer smollm2 differ by float32
        # rounding between a padded batch and one text alone)
        np.testing.assert_allclose(stats.table[c], np.nanmean(values, 0), rtol=1e-5, atol=1e-5, err_msg=c)
        np.testing.assert_allclose(stats.table[f"{c}_std"], np.nanstd(values, 0), rtol=1e-5, atol=1e-5, err_msg=c)
    # the majority class per head, up to documents whose statistics lie within the rounding of a rule's threshold
    assert_corpus_patterns(stats.table["pattern"], [class_inputs(r) for r in runs], _rounding(model), name)
    np.testing.assert_allclose(stats.similarity, np.mean(sims, 0), atol=1e-5)
    assert (stats.n_docs, stats.n_tokens) == (len(texts), sum(r.n for r in runs))
    assert (stats.table["n_docs"] == len(texts)).all()
    assert stats.model_name == model.name and stats.max_tokens == MAX_TOKENS
    assert stats.corpus_hash == corpus.corpus_hash(texts)
    assert stats.importance is None and "switched off" in stats.importance_note


@pytest.mark.parametrize("name, texts", MODELS)
def test_a_padded_batch_of_mixed_lengths_equals_each_document_alone(request, name, texts):
    model = request.getfixturevalue(name)
    batched = corpus.capture_runs(model, texts, max_tokens=MAX_TOKENS)
    lengths = {r.n for r in batched}
    assert len(lengths) > 3  # the batch really is padded
    for text, run in zip(texts, batched):
        alone = mha_viz.analyze(model, text, max_tokens=MAX_TOKENS)
        assert (run.tokens, run.token_ids, run.special_mask, run.word_ids, run.raw_tokens) == (
            alone.tokens, alone.token_ids, alone.special_mask, alone.word_ids, alone.raw_tokens)
        assert (run.is_causal, run.num_kv_heads, run.model_name, run.layer_ids, run.num_input_tokens) == (
            alone.is_causal, alone.num_kv_heads, alone.model_name, alone.layer_ids, alone.num_input_tokens)
        tol = _rounding(model)  # a wrong mask would move weights by orders of magnitude more
        np.testing.assert_allclose(run.attentions, alone.attentions, atol=tol)
        if alone.head_outputs is not None:
            np.testing.assert_allclose(run.head_outputs, alone.head_outputs, atol=tol)


def _same_stats(a, b, atol=1e-6, voters=None, rounding=0.0):
    """Equal statistics; 1e-6 leaves room for float32 rounding in forwards of other shapes. The classes:
    equal where both add the same documents' same numbers (`voters` None), or each the majority of
    `voters` (`corpus_voters`) up to documents within `rounding` of a rule's threshold."""
    num = a.table.select_dtypes("number").columns
    np.testing.assert_allclose(a.table[num], b.table[num], atol=atol)
    if voters is None:
        assert list(a.table["pattern"]) == list(b.table["pattern"])
    else:
        for stats in (a, b):
            assert_corpus_patterns(stats.table["pattern"], voters, rounding)
    np.testing.assert_allclose(a.similarity, b.similarity, atol=atol)
    assert (a.n_docs, a.n_tokens) == (b.n_docs, b.n_tokens)


def test_batch_size_one_and_seven_give_the_same_stats(tiny_gpt2):
    one = corpus.head_statistics(tiny_gpt2, ENGLISH, batch_size=1, max_tokens=MAX_TOKENS, importance=False)
    seven = corpus.head_statistics(tiny_gpt2, ENGLISH, batch_size=7, max_tokens=MAX_TOKENS, importance=False)
    _same_stats(one, seven, voters=corpus_voters(tiny_gpt2, ENGLISH, MAX_TOKENS), rounding=_rounding(tiny_gpt2))


def test_merge_order_does_not_matter_and_partials_pickle(toy):
    a, b, c = (corpus.batch_partial(toy, LETTERS[i:j], max_tokens=MAX_TOKENS, importance=False)
               for i, j in ((0, 3), (3, 4), (4, 10)))
    empty = corpus.Partial.empty(toy.num_layers, toy.num_heads)
    left = a.merge(b).merge(c).finish()
    right = empty.merge(c.merge(b.merge(a))).merge(empty).finish()
    again = pickle.loads(pickle.dumps(a)).merge(pickle.loads(pickle.dumps(b.merge(c)))).finish()
    _same_stats(left, right, atol=1e-12)  # the same sums, added in another order
    _same_stats(left, again, atol=1e-12)
    whole = corpus.head_statistics(toy, LETTERS, batch_size=4, max_tokens=MAX_TOKENS, importance=False)
    _same_stats(left, whole, voters=corpus_voters(toy, LETTERS, MAX_TOKENS), rounding=_rounding(toy))
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(corpus.Partial.empty(3, 4))


def test_importance_is_the_summed_batch_importance_normalised_per_layer(tiny_gpt2):
    stats = corpus.head_statistics(tiny_gpt2, ENGLISH, batch_size=5, max_tokens=MAX_TOKENS)
    total = importance.batch_importance(tiny_gpt2, ENGLISH, max_tokens=MAX_TOKENS)
    expected = total / np.linalg.norm(total, axis=1, keepdims=True)
    np.testing.assert_allclose(stats.importance, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(stats.importance, axis=1), 1.0, atol=1e-9)


def test_save_and_load_round_trip(tmp_path, tiny_gpt2):
    stats = corpus.head_statistics(tiny_gpt2, ENGLISH[:6], batch_size=4, max_tokens=MAX_TOKENS)
    folder = stats.save(tmp_path / "new" / "stats")
    back = corpus.CorpusStats.load(folder)
    _same_stats(stats, back, atol=1e-12)
    np.testing.assert_array_equal(stats.importance, back.importance)
    assert list(back.table.columns) == list(stats.table.columns)
    for field in ("model_name", "corpus_hash", "max_tokens", "importance_note"):
        assert getattr(back, field) == getattr(stats, field)
    assert back.seconds == pytest.approx(stats.seconds)
    np.testing.assert_array_equal(back.grid("entropy"), stats.table["entropy"].to_numpy().reshape(3, 4))


def test_a_broken_folder_is_refused(tmp_path, toy):
    stats = corpus.head_statistics(toy, LETTERS[:4], batch_size=4, max_tokens=MAX_TOKENS, importance=False)
    with pytest.raises(ValueError, match="table.csv is missing"):
        corpus.CorpusStats.load(tmp_path)
    folder = stats.save(tmp_path / "s")
    (folder / "meta.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        corpus.CorpusStats.load(folder)
    folder = stats.save(tmp_path / "t")
    table = (folder / "table.csv").read_text().splitlines()
    (folder / "table.csv").write_text("\n".join(table[:-1]) + "\n")  # one head's row lost
    with pytest.raises(ValueError, match="do not describe"):
        corpus.CorpusStats.load(folder)


def test_progress_is_called_after_each_batch_with_sane_numbers(toy):
    """The package's one protocol, progress(fraction, message): the share of the documents done, and a message
    that counts them, gives their rate and the time left (not known after the first batch, whose time holds the
    warm-up; nothing left after the last)."""
    calls = []
    stats = corpus.head_statistics(toy, LETTERS, batch_size=3, max_tokens=MAX_TOKENS, importance=False,
                                   progress=lambda fraction, message: calls.append((fraction, message)))
    assert [fraction for fraction, _ in calls] == [0.3, 0.6, 0.9, 1.0]
    assert [message.split(" · ")[0] for _, message in calls] == [f"{d} of 10 documents" for d in (3, 6, 9, 10)]
    rates = [float(message.split(" · ")[1].split()[0]) for _, message in calls]
    assert all(rate > 0 for rate in rates)
    assert calls[0][1].endswith(ESTIMATING) and calls[-1][1].endswith(FINISHING) and stats.seconds > 0


def test_cancel_stops_the_run(toy):
    calls = []

    def cancel_after_two(fraction, message):
        calls.append(fraction)
        return len(calls) < 2

    with pytest.raises(corpus.Cancelled, match="after 4 of 10 documents") as info:
        corpus.head_statistics(toy, LETTERS, batch_size=2, max_tokens=MAX_TOKENS, importance=False,
                               progress=cancel_after_two)
    assert calls == [0.2, 0.4] and (info.value.done, info.value.total) == (4, 10)


def test_the_old_four_number_progress_still_works_with_a_deprecation_warning(toy):
    calls = []

    def old(done, total, rate, eta):
        calls.append((done, total, rate, eta))
        return done < 6

    with pytest.warns(DeprecationWarning, match="progress\\(fraction, message\\)"):
        with pytest.raises(corpus.Cancelled, match="after 6 of 10 documents"):
            corpus.head_statistics(toy, LETTERS, batch_size=3, max_tokens=MAX_TOKENS, importance=False, progress=old)
    assert [c[0] for c in calls] == [3, 6] and all(total == 10 and rate > 0 for _, total, rate, _ in calls)
    assert np.isnan(calls[0][3]) and calls[1][3] >= 0


def test_a_model_by_name_a_file_and_bad_arguments(tmp_path):
    path = tmp_path / "letters.txt"
    path.write_text("\n".join(LETTERS[:3]) + "\n\n")
    stats = corpus.head_statistics("toy-induction", path, importance=False, max_tokens=MAX_TOKENS)
    assert stats.n_docs == 3 and stats.model_name == "toy-induction"
    with pytest.raises(ValueError, match="unknown engine"):
        corpus.head_statistics("toy-induction", LETTERS, engine="spark")
    with pytest.raises(ValueError, match="batch_size"):
        corpus.head_statistics("toy-induction", LETTERS, batch_size=0)
    with pytest.raises(corpus.CorpusError, match="no documents"):
        corpus.head_statistics("toy-induction", ["", " "])


def test_the_fused_baseline_forward_gives_the_captured_logits_and_leaves_eager_on(tiny_gpt2):
    ids, mask = corpus.batching.pad_batch(tiny_gpt2, [mha_viz.tokenize(tiny_gpt2, t, MAX_TOKENS) for t in ENGLISH[:4]])
    fused = tiny_gpt2.fused_forward(ids, mask)
    captured = tiny_gpt2.capture(ids, attention_mask=mask)  # still eager: probabilities come back
    real = mask.bool()
    np.testing.assert_allclose(fused.logits[real].numpy(), captured.output.logits[real].numpy(), atol=1e-4)
    assert len(captured.attentions) == tiny_gpt2.num_layers


def test_a_batch_over_the_capture_budget_is_split_and_a_document_over_it_refused(toy, monkeypatch):
    """Batches hold at most MHA_VIZ_MAX_CAPTURE_MB of attention: a budget for about two documents
    splits a batch of ten into several captures with the same result; a budget below one
    document's attention refuses it with a message."""
    from mha_viz.budget import capture_budget
    from mha_viz.corpus import batching

    whole = corpus.capture_runs(toy, LETTERS, max_tokens=MAX_TOKENS)
    calls = []
    real = toy.capture
    monkeypatch.setattr(toy, "capture", lambda ids, **kw: calls.append(ids.shape) or real(ids, **kw))
    n_max = max(r.n for r in whole)
    budget = batching.capture_bytes(toy, 2, n_max)  # two documents of the longest length
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: budget)
    split = corpus.capture_runs(toy, LETTERS, max_tokens=MAX_TOKENS)
    assert len(calls) > 1 and all(batching.capture_bytes(toy, b, n) <= budget for b, n in calls)
    for a, b in zip(whole, split):
        np.testing.assert_allclose(a.attentions, b.attentions, atol=1e-6)
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: 10)
    with pytest.raises(mha_viz.InputError, match="MHA_VIZ_MAX_CAPTURE_MB"):
        corpus.capture_runs(toy, LETTERS, max_tokens=MAX_TOKENS)
