"""A task's statistics on planted values (`tasks.uncertainty`): the bootstrap interval of a constant is that
constant, it covers the mean and is reproducible with its seed; the sign-flip p-value is at its floor for an
effect every pair shows and large for one that is pure sign noise. And the task generators and files
(`tasks.generators`, `PromptSet.from_file`): the same seed the same set, each pair built by its template."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.tasks import generators
from mha_viz.tasks.prompt_set import PromptSet
from mha_viz.tasks.uncertainty import bootstrap_interval, sign_flip_p
from mha_viz.text.tokenize import InputError


def test_the_interval_of_a_constant_is_the_constant_and_covers_the_mean():
    low, high = bootstrap_interval(np.full((30, 2, 3), 0.25), resamples=200, seed=1)
    np.testing.assert_allclose(low, 0.25)
    np.testing.assert_allclose(high, 0.25)
    values = np.random.default_rng(0).normal(1.0, 0.5, size=(400, 4))
    low, high = bootstrap_interval(values, resamples=500, seed=2)
    mean = values.mean(0)
    assert np.all(low < mean) and np.all(mean < high)
    se = values.std(0, ddof=1) / np.sqrt(400)  # the normal approximation: ± 1.96 standard errors
    np.testing.assert_allclose(high - low, 2 * 1.96 * se, rtol=0.2)


def test_the_numbers_do_not_depend_on_how_the_columns_are_split(monkeypatch):
    from mha_viz.tasks import uncertainty
    values = np.random.default_rng(9).normal(size=(20, 50))
    whole = bootstrap_interval(values, resamples=100, seed=1), sign_flip_p(values, resamples=100, seed=1)
    monkeypatch.setattr(uncertainty, "SCRATCH_BYTES", 8 * 100 * 7)  # 7 columns a block
    split = bootstrap_interval(values, resamples=100, seed=1), sign_flip_p(values, resamples=100, seed=1)
    np.testing.assert_allclose(whole[0][0], split[0][0], rtol=1e-12)  # the same resamples (a sum's rounding apart)
    np.testing.assert_allclose(whole[0][1], split[0][1], rtol=1e-12)
    np.testing.assert_array_equal(whole[1], split[1])


def test_the_interval_is_the_seeds():
    values = np.random.default_rng(5).normal(size=(25, 6))
    first = bootstrap_interval(values, resamples=300, seed=7)
    again = bootstrap_interval(values, resamples=300, seed=7)
    other = bootstrap_interval(values, resamples=300, seed=8)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other[0])


def test_sign_flip_p_tells_an_effect_from_sign_noise():
    rng = np.random.default_rng(3)
    effect = rng.uniform(0.5, 1.5, size=(40, 1))  # every pair moves the same way
    noise = rng.choice([-1.0, 1.0], size=(40, 1)) * np.ones((40, 1))  # mean 0 up to the draw
    p = sign_flip_p(np.concatenate([effect, noise], 1), resamples=999, seed=0)
    assert p[0] == pytest.approx(1 / 1000)  # no flip reaches the observed mean: the floor
    assert p[1] > 0.2
    np.testing.assert_array_equal(p, sign_flip_p(np.concatenate([effect, noise], 1), resamples=999, seed=0))


def test_generators_are_their_seeds_and_their_templates():
    a, b = generators.ioi(12, seed=4), generators.ioi(12, seed=4)
    assert a == b and a != generators.ioi(12, seed=5) and len(a) == 12
    assert generators.ioi(5, seed=4).pairs == a.pairs[:5]  # a smaller set is a prefix
    for pair in a.pairs:
        io, s = pair.answer.strip(), pair.wrong.strip()
        assert pair.clean.count(s) == 2 and pair.clean.count(io) == 1  # the subject twice, the object once
        assert pair.corrupted.count(s) == 1 and pair.clean.split() != pair.corrupted.split()
        assert len(pair.clean.split()) == len(pair.corrupted.split())
    for pair in generators.greater_than(20, seed=1).pairs:
        yy = int(pair.clean.split("17")[1][:2])
        assert (int(pair.answer), int(pair.wrong)) == (yy + 1, yy - 1) and "1701" in pair.corrupted
    for pair in generators.greater_than(20, seed=1, digits=1).pairs:  # a decade's digit: later and earlier years
        yy = int(pair.clean.split("17")[1][:2])
        assert 10 <= yy < 90 and (int(pair.answer), int(pair.wrong)) == (yy // 10 + 1, yy // 10 - 1)
        assert "1701" in pair.corrupted and len(pair.answer) == len(pair.wrong) == 1
    # `make` picks the digits from the tokenizer: "The year 1733" in 4 tokens (GPT-2's "17", "33") or 7 (one a digit)
    def reads(count):
        return lambda text, add_special_tokens=True: {"input_ids": list(range(count))}
    assert generators.make("greater_than", 5, seed=1, tokenizer=reads(4)) == generators.greater_than(5, seed=1)
    assert generators.make("greater_than", 5, seed=1, tokenizer=reads(7)) == generators.greater_than(5, seed=1,
                                                                                                      digits=1)
    assert generators.make("ioi", 5, seed=1, tokenizer=reads(7)) == generators.ioi(5, seed=1)
    for pair in generators.docstring(20, seed=3).pairs:  # the third parameter documented next, over the fourth
        signature, corrupted = pair.clean.split("\n")[0], pair.corrupted.split("\n")[0]
        names = signature[signature.index("self, ") + 6:-2].split(", ")
        assert pair.answer == f" {names[2]}" and pair.wrong == f" {names[3]}" and len(set(names)) == 4
        assert pair.clean.endswith(":param") and f":param {names[1]}:" in pair.clean
        assert pair.clean.split("\n")[1:] == pair.corrupted.split("\n")[1:]  # only the signature differs
        assert not set(names) & set(corrupted[corrupted.index("self, ") + 6:-2].split(", "))
    assert generators.docstring(7, seed=3).pairs == generators.docstring(20, seed=3).pairs[:7]
    for pair in generators.induction(20, seed=2, length=6).pairs:
        words = pair.clean.split()
        first, again = words[:6], words[6:]
        assert again == first[:len(again)] and pair.answer.strip() == first[len(again)]
        assert pair.wrong.strip() not in words and pair.corrupted.split()[:6] == first
        assert not set(pair.corrupted.split()[6:]) & set(first)


def test_files_of_pairs_and_their_mistakes(tmp_path):
    rows = [("A b c", "A d c", " x", " y"), ("e, f", "g, f", " z", " w")]
    csv = tmp_path / "task.csv"
    csv.write_text("clean,corrupted,answer,wrong\n" + "\n".join(",".join(f'"{v}"' for v in r) for r in rows) + "\n")
    jsonl = tmp_path / "task.jsonl"
    jsonl.write_text("\n".join('{"clean": "%s", "corrupted": "%s", "answer": "%s", "wrong": "%s"}' % r for r in rows))
    for path in (csv, jsonl):
        prompts = PromptSet.from_file(path)
        assert [tuple(vars(p).values()) for p in prompts.pairs] == rows and prompts.source == path.name
    (tmp_path / "bad.csv").write_text("clean,corrupted,answer\na,b,c\n")
    with pytest.raises(InputError, match="bad.csv has no column wrong"):
        PromptSet.from_file(tmp_path / "bad.csv")
    (tmp_path / "bad.jsonl").write_text('{"clean": "a"\n')
    with pytest.raises(InputError, match="Line 1 of bad.jsonl is not JSON"):
        PromptSet.from_file(tmp_path / "bad.jsonl")
    with pytest.raises(InputError, match="no pairs"):
        PromptSet((), "empty")


def test_a_csv_without_a_column_is_refused_by_name_even_without_rows(tmp_path):
    import pytest

    from mha_viz.tasks.prompt_set import PromptSet
    from mha_viz.text.tokenize import InputError
    with pytest.raises(InputError, match="pairs.csv has no column wrong: a prompt set's CSV has a header row"):
        PromptSet.from_file("pairs.csv", "clean,corrupted,answer\n")
    assert len(PromptSet.from_file("pairs.csv", "clean,corrupted,answer,wrong\nA b,A c, d, e\n")) == 1
