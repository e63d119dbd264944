"""The computations planned in stops 103 and 104 (`mha_viz.budget.plan`, issue 92): switching heads off, the teaching
walkthrough's recording, *Why here?*'s split, the corpus's pruning check, a long run's value norms and its derived runs,
Head composition's scores and a run's downloads.
Each reads its text once, declares the need of what runs (computed here by hand from the pieces it is made of),
refuses before anything runs, and gives what an independent computation gives: Hugging Face's own loss, the model's
own hidden states, the plain function's numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_viz.budget import memory, plan
from mha_viz.interventions import ablation
from mha_viz.text.tokenize import InputError

TEXT = "The keeper lit the lamp and the boats came home one by one."
DOCS = ["The river ran past the mill all night.", "A cat slept on the warm stone wall.",
        "Rain fell on the quiet town until morning came."]


def _hf_loss(model, text: str, cap: int | None = None) -> float:
    """Hugging Face's own next-token loss of `text` (its first `cap` tokens), every head on."""
    ids = torch.tensor([model.tokenizer(text)["input_ids"][:cap]])
    with torch.no_grad():
        return float(model.hf_model(input_ids=ids, labels=ids).loss)


def _counting(monkeypatch, module, name: str = "prepare") -> list:
    reads: list = []
    real = getattr(module, name)

    def counted(model, text, *args, **kwargs):
        reads.append(text)
        return real(model, text, *args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return reads


def test_switching_heads_off_is_read_once_priced_as_a_forward_and_scored_as_hugging_face_scores(tiny_gpt2,
                                                                                              monkeypatch):
    from mha_viz.interventions import ablation_outcome

    reads = _counting(monkeypatch, ablation_outcome)
    n = len(tiny_gpt2.tokenizer(TEXT)["input_ids"])
    on = ablation_outcome.plan_unablated(tiny_gpt2, TEXT)
    assert reads == [TEXT] and on.n == n and on.need == plan.forward(tiny_gpt2, n) and on.admit
    base = on.run()
    assert reads == [TEXT]  # the pass ran on the plan's tokens
    assert base.loss == pytest.approx(_hf_loss(tiny_gpt2, TEXT), rel=1e-5)
    keep = np.ones((tiny_gpt2.num_layers, tiny_gpt2.num_heads), dtype=bool)
    every = ablation_outcome.plan_ablated(tiny_gpt2, TEXT, keep, base=base)
    assert not every.admit and every.run() is base and reads == [TEXT]  # every head on: the answer, no read
    keep[0] = False
    off = ablation_outcome.plan_ablated(tiny_gpt2, TEXT, keep, base=base)
    assert off.need == plan.forward(tiny_gpt2, n) and reads == [TEXT, TEXT]
    assert off.run().loss != pytest.approx(base.loss, rel=1e-6)  # layer 0 off moves the loss
    with pytest.raises(InputError):
        ablation_outcome.plan_unablated(tiny_gpt2, "a")  # one token: nothing to predict, refused while planning


def test_switching_heads_off_reads_an_analysis_forward_and_admits_nothing(tiny_gpt2, monkeypatch):
    import mha_viz
    from mha_viz.interventions import ablation_outcome

    run = mha_viz.analyze(tiny_gpt2, TEXT)
    passes: list = []
    monkeypatch.setattr(ablation_outcome, "_outcome", lambda *a: passes.append(a))
    read = ablation_outcome.plan_unablated(tiny_gpt2, TEXT, run=run)
    assert not read.admit and read.n == run.n
    assert read.run().loss == pytest.approx(_hf_loss(tiny_gpt2, TEXT), rel=1e-5)
    assert passes == []  # read off the run: no forward of its own


def test_the_walkthroughs_recording_is_read_once_priced_as_a_forward_and_holds_the_models_inputs(tiny_gpt2_ours,
                                                                                               monkeypatch):
    from mha_viz.views import teaching

    model = tiny_gpt2_ours
    reads = _counting(monkeypatch, teaching, "tokenize")
    p = teaching.plan_record(model, TEXT, 8)
    assert reads == [TEXT] and p.n == 8 and p.need == plan.forward(model, 8)
    rec = p.run()
    assert reads == [TEXT] and len(rec.tokens) == 8
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"][:8]])
    with torch.no_grad():
        hidden = model.hf_model(input_ids=ids, output_hidden_states=True).hidden_states
        # layer 1's input: the residual stream after block 0 (Hugging Face's hidden_states[1]) through block 1's
        # layer norm (GPT-2 is pre-LN: what the projections read)
        expected = model.hf_model.transformer.h[1].ln_1(hidden[1])[0]
    torch.testing.assert_close(rec.spill.part(1, "x", "cpu").float().reshape(8, -1), expected, rtol=1e-4, atol=1e-5)


def test_why_here_is_read_and_checked_once_and_refused_before_the_model_runs(tiny_gpt2_ours, monkeypatch):
    from mha_viz.circuits import score_terms

    model = tiny_gpt2_ours
    expected = score_terms.qk_terms(model, TEXT, 1, 0, -1, 2)
    reads = _counting(monkeypatch, score_terms, "tokenize")
    p = score_terms.plan_qk_terms(model, TEXT, 1, 0, -1, 2)
    n = len(model.tokenizer(TEXT)["input_ids"])
    assert reads == [TEXT] and p.n == n
    assert p.need == memory.Need(host=score_terms.need_bytes(model, n, pattern=False))
    got = p.run()
    assert reads == [TEXT] and got.score == pytest.approx(expected.score, rel=1e-6)
    assert got.terms.sum() == pytest.approx(got.score, rel=1e-4, abs=1e-5)  # the terms add up to the real score
    whole = score_terms.plan_qk_pattern_terms(model, TEXT, 1, 0)
    assert whole.need.host > p.need.host  # every pair's parts on both sides
    ran: list = []
    monkeypatch.setattr(score_terms.stream, "record", lambda *a, **k: ran.append(a))
    with pytest.raises(InputError, match="outside"):
        score_terms.plan_qk_terms(model, TEXT, 1, 0, 500, 2)
    assert ran == []


def test_the_corpus_pruning_check_reads_its_documents_once_for_every_order(tiny_gpt2, monkeypatch):
    from mha_viz.corpus import importance
    from mha_viz.features.corpus.plan import plan_pruning
    from mha_viz.text import loss_inputs

    L, H = tiny_gpt2.num_layers, tiny_gpt2.num_heads
    scores = np.arange(L * H, dtype=float).reshape(L, H)
    reads = _counting(monkeypatch, loss_inputs)
    p = plan_pruning(tiny_gpt2, scores, DOCS, 32, [0.0, 0.5], randoms=2)
    assert sorted(reads) == sorted(DOCS)  # each document read once, for the three orders
    n = min(32, max(len(tiny_gpt2.tokenizer(d)["input_ids"]) for d in DOCS))  # each cut to 32 tokens
    rows = 2 * len(DOCS)  # the documents under both fractions' masks, side by side, and their losses' logits
    loss = 4 * ablation.LOSS_COPIES * n * memory.logits_width(tiny_gpt2)  # one text's logits at a time
    assert p.n == n and p.need == plan.on_device(tiny_gpt2, plan.forward_bytes(tiny_gpt2, n, rows) + loss)
    curves = p.run()
    assert curves.shape == (3, 2) and sorted(reads) == sorted(DOCS)
    # every head on: each order's first point is the documents' mean Hugging Face loss
    np.testing.assert_allclose(curves[:, 0], np.mean([_hf_loss(tiny_gpt2, d, 32) for d in DOCS]), rtol=1e-5)
    least_first = np.argsort(scores.ravel())
    np.testing.assert_allclose(curves[0], importance.pruning_curve(tiny_gpt2, DOCS, least_first, [0.0, 0.5],
                                                                   max_tokens=32), rtol=1e-6)
    with pytest.raises(InputError, match="too short"):
        plan_pruning(tiny_gpt2, scores, ["a"], 32, [0.0], randoms=0)


def test_a_long_runs_value_norms_and_derived_runs_are_priced_by_hand(tiny_gpt2_ours, monkeypatch):
    import mha_viz
    from mha_viz.capture import contributions, head_rows
    from mha_viz.derived import run as derived

    model = tiny_gpt2_ours
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")  # a long run at any length
    long = mha_viz.analyze(model, TEXT)
    dense = mha_viz.analyze(model, TEXT, layers=list(range(model.num_layers)))
    assert not long.is_dense and long.value_norms is None
    L, H, n = model.num_layers, model.num_heads, long.n
    p = contributions.plan_value_norms(long, model)
    assert p.n == n and p.need == memory.Need(host=plan.forward_bytes(model, n) + 4 * L * H * n)
    norms = p.run()
    np.testing.assert_allclose(norms, dense.value_norms, rtol=1e-5, atol=1e-6)  # the dense capture's norms
    made = contributions.plan_value_norms(long, model)
    assert not made.admit and made.run() is norms  # made: read, nothing to admit
    kept = 4 * L * H * n * (2 * long.summary.top_k + 2)
    hide = derived.plan_hide(long, np.eye(1, n, 0, dtype=bool)[0])
    assert hide.need == memory.Need(host=kept + 3 * head_rows.BLOCK_BYTES) == derived.need(long)
    assert hide.run().n == n - 1
    lens = derived.plan_contributions(long, norms)
    assert lens.need == hide.need and lens.run().lens


def test_the_composition_scores_are_priced_by_hand_and_admitted_once(gpt2_dir, monkeypatch):
    """Head composition reads the weights alone (n = 0): its need is the folded weights, the scores and one block of
    the pairwise product, counted here from the model's shapes; once the scores are kept a plan admits nothing and
    multiplies nothing. A model loaded here (the suite's shared one may have its scores kept by another test)."""
    import mha_viz
    from mha_viz.circuits import composition
    from mha_viz.circuits import need as circuit_need

    model = mha_viz.load_model(str(gpt2_dir), device="cpu")
    L, H, G, d, d_k = model.num_layers, model.num_heads, model.num_kv_heads, model.d_model, model.d_k
    weights = int(1.5 * 8 * L * 2 * (H + G) * d * d_k)
    first = circuit_need.plan_composition(model)
    assert first.n == 0 and first.admit
    assert first.need == memory.Need(host=weights + 3 * (L * H) ** 2 * 12 + 3 * 4 * composition.BLOCK)
    scores, baseline = first.run()
    assert set(scores) == set(baseline) == {"q", "k", "v"} and scores["k"].shape == (L, H, L, H)
    monkeypatch.setattr(composition, "_pair_scores", lambda *a: pytest.fail("multiplied again"))
    again = circuit_need.plan_composition(model)
    assert not again.admit
    np.testing.assert_array_equal(again.run()[0]["k"], scores["k"])
    copying = circuit_need.plan_copying(model)
    vocab = model.hf_model.config.vocab_size
    assert copying.admit and copying.need == memory.Need(host=16 * d * vocab + weights)
    assert copying.run().shape == (L, H) and not circuit_need.plan_copying(model).admit


def test_a_runs_downloads_are_planned_and_each_file_fits_its_need(tiny_gpt2):
    """The `.npz` and the report are made from the run shown, on its tokens (no model runs); the file handed out
    is one of the three copies its need counts, and reads back as the run (`AttentionRun.load`)."""
    import io

    import mha_viz
    from mha_viz.export import downloads

    run = mha_viz.analyze(tiny_gpt2, TEXT)
    npz = downloads.plan_npz(run)
    assert npz.n == run.n and npz.admit
    data = npz.run()
    assert 3 * len(data) <= npz.need.host
    back = mha_viz.AttentionRun.load(io.BytesIO(data))
    np.testing.assert_array_equal(back.attentions, run.attentions)
    half = downloads.plan_npz(run, float16=True)
    assert half.need.host < npz.need.host and 3 * len(half.run()) <= half.need.host
    asked: list = []
    report = downloads.plan_report(run, [(0, 0), (1, 1)], table=lambda: asked.append("table"),
                                   facts=lambda: {"model": run.model_name})
    assert asked == []  # the table is made on the click, not when the button is drawn
    page = report.run().decode()
    assert asked == ["table"] and run.model_name in page and report.need.host == downloads.report_need(run, 2)
