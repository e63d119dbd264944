"""A computation planned once (`mha_viz.budget.plan`, issue 92): the importance and the pruning curve read their text
once, declare the need of what runs, and refuse a pass that can never fit before anything runs. Against the plain
functions (the same numbers), a count of the reads, and the need computed by hand from `gradient_bytes`."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.budget import memory, plan
from mha_viz.interventions import ablation
from mha_viz.text.tokenize import InputError

TEXT = "The keeper lit the lamp and the boats came home one by one."


def _counting(monkeypatch) -> list:
    reads: list = []
    real = ablation.prepare

    def prepare(model, text, max_tokens=None):
        reads.append(text)
        return real(model, text, max_tokens)

    monkeypatch.setattr(ablation, "prepare", prepare)
    return reads


def test_the_importance_is_read_once_priced_as_what_runs_and_gives_the_plain_functions_numbers(tiny_gpt2,
                                                                                             monkeypatch):
    expected = ablation.head_importance(tiny_gpt2, TEXT)
    reads = _counting(monkeypatch)
    p = ablation.plan_importance(tiny_gpt2, TEXT)
    got = p.run()
    assert reads == [TEXT]  # planned and run on one read of the text
    n = len(tiny_gpt2.tokenizer(TEXT)["input_ids"])
    assert p.n == n
    # the fused gradient pass is what runs (heads_off_loss on SDPA); the unfused estimate is larger
    assert p.need == memory.Need(host=ablation.gradient_bytes(tiny_gpt2, n, fused=True))
    assert p.need.host < ablation.gradient_bytes(tiny_gpt2, n)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.model
def test_an_embedding_models_importance_is_planned_as_its_forward_passes(minilm, monkeypatch):
    expected = ablation.head_importance(minilm, TEXT)
    reads = _counting(monkeypatch)
    p = ablation.plan_importance(minilm, TEXT)
    runs = minilm.num_layers * minilm.num_heads + 1  # every head alone off, and none: side by side, no logits
    assert p.need == plan.on_device(minilm, runs * plan.forward_bytes(minilm, p.n))
    assert p.need.host < ablation.BATCH_BYTES
    np.testing.assert_allclose(p.run(), expected, rtol=1e-5, atol=1e-7)
    assert reads == [TEXT]


def test_a_gradient_pass_that_cannot_fit_is_refused_by_the_plan_before_anything_runs(tiny_gpt2, monkeypatch):
    from tests.helpers import capture_budget_of

    n = len(tiny_gpt2.tokenizer(TEXT)["input_ids"])
    capture_budget_of(monkeypatch, ablation.gradient_bytes(tiny_gpt2, n, fused=True) - 1)  # one byte short
    ran: list = []
    monkeypatch.setattr(ablation, "_gradients", lambda *a: ran.append(a))
    with pytest.raises(ablation.GradientBudget, match=f"At most {n - 1} tokens fit"):
        ablation.plan_importance(tiny_gpt2, TEXT)
    assert ran == []


def test_the_pruning_curves_are_read_once_and_match_the_plain_function(tiny_gpt2, monkeypatch):
    L, H = tiny_gpt2.num_layers, tiny_gpt2.num_heads
    orders = [np.arange(L * H), np.arange(L * H)[::-1]]
    fractions = [0.0, 0.5]
    expected = ablation.pruning_curves(tiny_gpt2, TEXT, orders, fractions)
    reads = _counting(monkeypatch)
    p = ablation.plan_pruning(tiny_gpt2, TEXT, orders, fractions)
    rows = 3  # the distinct masks, side by side: every head on (f = 0 in both orders), each order's half off
    loss = 4 * ablation.LOSS_COPIES * p.n * memory.logits_width(tiny_gpt2)  # the loss's copies of one text's logits
    assert p.need == plan.on_device(tiny_gpt2, plan.forward_bytes(tiny_gpt2, p.n, rows) + loss)
    np.testing.assert_allclose(p.run(), expected, rtol=1e-6)
    assert reads == [TEXT] and expected[0, 0] == expected[1, 0]  # f = 0: every head on, in both orders
    assert expected[0, 1] != expected[1, 1]  # half the heads off, different halves


def test_an_analysis_is_planned_as_what_analyze_runs(tiny_gpt2, monkeypatch):
    from mha_viz import analyze_text, needs

    p = analyze_text.plan_analysis(tiny_gpt2, TEXT, layers=[0, 2])
    n = len(tiny_gpt2.tokenizer(TEXT)["input_ids"])
    assert p.n == n and p.need == needs.analysis(tiny_gpt2, n, layers=2)
    assert p.need != needs.analysis(tiny_gpt2, n)  # two layers of three: less than every layer
    run = p.run()
    assert run.layer_ids == [0, 2] and run.n == n
    with pytest.raises(analyze_text.InputError):
        analyze_text.plan_analysis(tiny_gpt2, "   ")  # refused while planning: nothing runs
    # past MHA_VIZ_DENSE_MB analyze makes a long run, and the plan prices the scan it runs, not the dense array
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    long = analyze_text.plan_analysis(tiny_gpt2, TEXT)
    assert needs.is_long(tiny_gpt2, n) and long.need == needs.scan(tiny_gpt2, n)
    assert not long.run().is_dense


def test_a_generation_is_read_and_checked_once_and_priced_as_it_runs(tiny_gpt2, monkeypatch):
    from mha_viz import generate_text, needs
    from mha_viz.capture import generation

    expected = generate_text.generate(tiny_gpt2, TEXT, 4, seed=3, temperature=1.0)
    reads: list = []
    real = generation.tokenize
    monkeypatch.setattr(generation, "tokenize", lambda *a, **k: reads.append(a[1]) or real(*a, **k))
    p = generate_text.plan_generation(tiny_gpt2, TEXT, 4)
    got = p.run(seed=3, temperature=1.0)
    assert reads == [TEXT]  # read once: planned and generated on the same tokens
    n = len(tiny_gpt2.tokenizer(TEXT)["input_ids"]) + 4
    assert p.n == n and p.need == needs.generation(tiny_gpt2, n, 4, long=False)
    assert got.text == expected.text and got.run.n == expected.run.n
    np.testing.assert_allclose(got.run.attentions, expected.run.attentions, rtol=1e-5, atol=1e-6)
    # a long generation (dense=False) is priced as one: the new tokens' rows and a scan, not the dense array
    long = generate_text.plan_generation(tiny_gpt2, TEXT, 4, dense=False)
    assert long.need == needs.generation(tiny_gpt2, n, 4, long=True) != p.need
    # past the positions the model has, refused while planning, before anything runs
    with pytest.raises(generation.GenerationError, match="new tokens fit"):
        generate_text.plan_generation(tiny_gpt2, TEXT, 10_000)


@pytest.mark.model
def test_a_task_is_checked_once_priced_on_its_longest_pair_and_runs_as_planned(toy_induction, monkeypatch):
    from mha_viz.circuits import need as job_need
    from mha_viz.features.task import plan as task_plan
    from mha_viz.interventions import prediction
    from tests.models.task_pairs import letter_pairs

    prompts = letter_pairs(4, seed=1)
    longest = max((p.clean for p in prompts.pairs), key=len)
    n = len(toy_induction.tokenizer(longest)["input_ids"])
    checks: list = []
    real = prediction.check_budget
    monkeypatch.setattr(prediction, "check_budget", lambda *a, **k: checks.append(a[1]) or real(*a, **k))
    p = task_plan.plan_task(toy_induction, prompts, "patch", 64)
    assert p.n == n and p.need == job_need.patching(toy_induction, n) and checks == [longest]
    assert task_plan.plan_task(toy_induction, prompts, "estimate", 64).need == job_need.estimate(toy_induction, n)
    edges_plan = task_plan.plan_task(toy_induction, prompts, "eap", 64)
    assert edges_plan.need == job_need.circuit(toy_induction, n, method="eap", steps=task_plan.IG_STEPS)
    done: list = []
    result = p.run(progress=lambda f, m: done.append(f))
    assert checks == [longest, longest]  # the two pair plans checked once each; running one checks nothing again
    assert result.mean.shape == (toy_induction.num_layers, toy_induction.num_heads) and done


@pytest.mark.model
def test_a_circuit_is_read_and_checked_once_and_refused_before_anything_runs(toy_induction, monkeypatch):
    from mha_viz.circuits import edges
    from mha_viz.circuits import need as job_need
    from mha_viz.features.circuit.plan import plan_circuit
    from mha_viz.interventions import patching
    from tests.models.task_pairs import letter_pairs

    pair = letter_pairs(1, seed=2).pairs[0]
    reads: list = []
    real = edges.texts
    monkeypatch.setattr(edges, "texts", lambda *a, **k: reads.append(a[1]) or real(*a, **k))
    p = plan_circuit(toy_induction, pair.clean, pair.corrupted, pair.answer, pair.wrong, method="eap", max_tokens=64)
    n = patching.texts(toy_induction, pair.clean, pair.corrupted, pair.answer, pair.wrong, None, 64).n
    assert p.n == n and p.need == job_need.circuit(toy_induction, n, method="eap")
    found = p.run()
    assert reads == []  # edge attribution read the plan's texts, not its own
    direct = edges.edge_attribution(toy_induction, pair.clean, pair.corrupted, pair.answer, pair.wrong, method="eap")
    np.testing.assert_allclose(found.scores["score"], direct.scores["score"], rtol=1e-5, atol=1e-7)
    assert found.extra["curve"]["k"][0] == 0 and len(found.extra["curve"]["faithfulness"]) > 1
    with pytest.raises(patching.InputError, match="one token"):  # refused while planning
        plan_circuit(toy_induction, pair.clean, pair.corrupted, " not one token at all", pair.wrong, method="eap",
                     max_tokens=64)


@pytest.mark.model
def test_a_pairs_estimate_and_patching_are_checked_once_and_run_as_planned(toy_induction, monkeypatch):
    from mha_viz.circuits import need as job_need
    from mha_viz.features.prediction.plan import plan_estimate, plan_patching
    from mha_viz.interventions import prediction
    from tests.helpers import capture_budget_of
    from tests.models.task_pairs import letter_pairs

    pair = letter_pairs(1, seed=3).pairs[0]
    n = len(toy_induction.tokenizer(pair.clean)["input_ids"])
    checks: list = []
    real = prediction.check_budget
    monkeypatch.setattr(prediction, "check_budget", lambda *a, **k: checks.append(k["batch"]) or real(*a, **k))
    estimated = plan_estimate(toy_induction, pair.clean, pair.corrupted, pair.answer, pair.wrong, max_tokens=64)
    assert estimated.n == n and estimated.need == job_need.estimate(toy_induction, n)
    expl = estimated.run()
    patching = plan_patching(toy_induction, expl, pair.clean, pair.corrupted, max_tokens=64)
    assert patching.need == job_need.patching(toy_induction, n)
    patched = patching.run()
    assert checks == [False, True]  # one check a plan, none while running
    assert patched.patching is not None and expl.patching is None
    # a batch over the capture budget is refused while planning, naming what fits
    capture_budget_of(monkeypatch, toy_induction.attention_bytes(n) * 2)
    with pytest.raises(InputError, match="tokens"):
        plan_patching(toy_induction, expl, pair.clean, pair.corrupted, max_tokens=64)


def test_a_retrieval_search_is_planned_as_one_trials_generation_and_refused_before_it_runs(tiny_gpt2, monkeypatch):
    from mha_viz import needs
    from mha_viz.capture import generation
    from mha_viz.tasks import retrieval
    from tests.helpers import capture_budget_of

    needle = ("Key: box.", "Key?")
    prompt, new = retrieval.trial_tokens(tiny_gpt2, needle, 24)
    p = retrieval.plan_search(tiny_gpt2, needle, 24, [0.5])
    assert not generation.goes_long(tiny_gpt2, prompt + new)  # a short trial: its dense array, as priced
    assert p.n == prompt + new and p.need == needs.generation(tiny_gpt2, prompt + new, new, long=False)
    found = p.run(progress=None)
    direct = retrieval.find_retrieval(tiny_gpt2, needles=[needle], lengths=(24,), depths=(0.5,))
    assert found.table.equals(direct.table)  # greedy: the same search
    capture_budget_of(monkeypatch, 1)  # a byte: even the new tokens' rows of a long generation do not fit
    ran: list = []
    monkeypatch.setattr(retrieval, "find_retrieval", lambda *a, **k: ran.append(a))
    with pytest.raises(InputError, match="choose a prompt length of at most"):
        retrieval.plan_search(tiny_gpt2, needle, 24, [0.5])
    assert ran == []
