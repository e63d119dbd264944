"""What each heavy path declares to the admission (`mha_viz.needs`), against a hand computation
or the estimate it reuses, on a stand-in model (6 layers, 4 heads of d_k 8, d_model 32, vocabulary
100): no model is loaded. The circuit's needs, which read a model's graph, are in
tests/models/test_needs_models.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mha_viz import needs
from mha_viz.budget import admission, memory, plan
from mha_viz.capture import own_outputs
from mha_viz.circuits import need as prediction_need
from mha_viz.export import downloads
from mha_viz.features.corpus import plan as corpus_plan
from mha_viz.interventions import ablation
from mha_viz.scan import rows
from mha_viz.text import loss_inputs

MiB = 2**20
L, H, D, DK, V = 6, 4, 32, 8, 100


def _model(device="cpu", recompute=True):
    hf = SimpleNamespace(config=SimpleNamespace(vocab_size=V), forward=lambda input_ids, logits_to_keep=0: None)
    return SimpleNamespace(name="stand-in", num_layers=L, num_heads=H, d_model=D, d_k=DK, device=torch.device(device),
                           has_head_outputs=True, can_recompute=recompute, hf_model=hf, is_encoder_decoder=False,
                           is_causal=True, effective="",
                           attention_bytes=lambda n, layers=None, batch=1: (L if layers is None else layers) * batch
                           * H * n * n * 4)


@pytest.fixture(autouse=True)
def _budget(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")  # 1 MiB: what batches are cut to


def test_working_memory_goes_where_the_model_runs(monkeypatch):
    assert plan.on_device(_model(), 10, kept=3) == memory.Need(host=13)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert plan.on_device(_model("cuda"), 10, kept=3) == memory.Need(host=3, gpu=10, device="cuda:0")
    both = needs.larger(memory.Need(host=5, gpu=1, device="cuda:0"), memory.Need(host=2, gpu=9, device="cuda:0"))
    assert both == memory.Need(host=5, gpu=9, device="cuda:0")


def test_a_forward_and_a_gradient_pass():
    n = 10
    # per sequence: scores 3·4·10², 12 activations 12·10·32, logits 10·100 floats
    assert plan.forward(_model(), n, rows=2).host == 2 * 4 * (1200 + 3840 + 1000)
    # by hand: 6·(4·10² + 24·10·32) + 3·4·10² + 3·10·100 floats
    assert ablation.gradient_bytes(_model(), n) == 4 * (6 * (400 + 7680) + 1200 + 3000)


def test_the_estimate_is_its_backward_pass_or_both_texts_runs_whichever_is_larger(monkeypatch):
    n = 10
    # the stand-in's forward takes logits_to_keep: the backward pass makes the last position's logits only
    backward = ablation.gradient_bytes(_model(), n, logit_rows=1)
    assert backward == 4 * (6 * (400 + 7680) + 1200 + 3 * 100)
    runs = memory.analysis_need(_model(), n).host + memory.run_bytes(_model(), n)
    assert memory.run_bytes(_model(), n) == 4 * L * H * (100 + 80 + 10)
    assert prediction_need.estimate(_model(), n).host == max(backward, runs)
    monkeypatch.setattr(memory, "host_available", lambda: 2**40)
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "2000")
    monkeypatch.setattr(ablation, "gradient_bytes", lambda *a, **k: 10**9)
    assert prediction_need.estimate(_model(), n).host == 10**9
    # a backward pass over the memory there is is not run (`explain` goes on without it): not declared
    monkeypatch.setattr(ablation, "gradient_bytes", lambda *a, **k: 2**50)
    assert prediction_need.estimate(_model(), n).host == runs


def test_patching_is_a_batch_of_one_sequence_a_head():
    assert prediction_need.patching(_model(), 10).host == H * plan.forward_bytes(_model(), 10)


def test_a_generation_holds_what_an_analysis_of_prompt_and_new_tokens_holds():
    assert needs.generation(_model(), 12) == memory.analysis_need(_model(), 12)


def test_a_corpus_job_is_its_batch_or_its_gradient_passes_within_the_capture_budget():
    n = 10
    capture = 2 * L * H * n * n * 4  # `batching.capture_bytes` of one document: 19,200 bytes
    assert corpus_plan.corpus(_model(), 4, n, importance=False).host == 4 * capture
    one = ablation.gradient_bytes(_model(), n)
    assert corpus_plan.corpus(_model(), 4, n, importance=True).host == max(4 * capture, 4 * one)
    # batches are cut to the capture budget (1 MiB), never below one document
    assert corpus_plan.corpus(_model(), 1000, n, importance=True).host == MiB
    assert corpus_plan.corpus(_model(), 1000, 200, importance=False).host == 2 * L * H * 200 * 200 * 4


def test_an_embedding_models_corpus_importance_holds_its_batch_under_every_head_mask_at_once(monkeypatch):
    """No gradient: each batch of 4 runs under the L·H + 1 masks side by side (`ablation.each_head_off`), 4 rows a
    mask, all of them within `ablation.BATCH_BYTES` here: each row's forward and the loss's copies of one text's
    logits (V of them a token); with a smaller BATCH_BYTES, as many masks as it holds, and one at least."""
    n = 10
    monkeypatch.setattr(corpus_plan, "loss_kind", lambda _model: loss_inputs.EMBEDDING)
    one = plan.forward_bytes(_model(), n, 4)  # one mask's 4 rows
    loss = 4 * ablation.LOSS_COPIES * n * V  # the loss's copies of one text's logits at a time, however many rows
    assert (L * H + 1) * one + loss < ablation.BATCH_BYTES
    assert corpus_plan.corpus(_model(), 4, n, importance=True).host == (L * H + 1) * one + loss
    monkeypatch.setattr(ablation, "BATCH_BYTES", 3 * one + loss + 1)
    assert ablation.effect_rows(_model(), n, 4) == 3 * 4  # three masks' rows, not four
    assert corpus_plan.corpus(_model(), 4, n, importance=True).host == max(3 * one + loss + 1,
                                                                             4 * ablation.gradient_bytes(_model(), n))
    monkeypatch.setattr(ablation, "BATCH_BYTES", 1)
    assert ablation.effects_bytes(_model(), n, 4) == one + loss


def test_the_whole_text_overview():
    n, top_k, thumb = 50, 8, 48
    kept = 4 * L * H * (n * (2 * top_k + 1) + thumb * thumb)  # top keys and weights, the rest, thumbnails
    block = 4 * H * n * rows.rows_per_block("cpu", H, n)
    # the forward's activations; the loss made later: a block of logits (all n − 1 rows of so small a vocabulary),
    # their log-probabilities, the last row's
    forward = 4 * 12 * n * D + 4 * V * (2 * (n - 1) + 1)
    assert needs.scan(_model(), n).host == kept + block + forward
    # a family read through its own attention holds one layer's probabilities (twice) besides
    assert needs.scan(_model(recompute=False), n).host == kept + block + forward + 2 * H * n * n * 4


def test_a_long_runs_loss_is_made_a_block_of_logits_at_a_time():
    # SmolLM2's vocabulary over 2,048 tokens: 64 MiB blocks of 341 rows, not the 384 MiB of every row's logits
    assert own_outputs.read_bytes(49152, 2048) == 4 * 49152 * (2 * 341 + 1)
    assert own_outputs.read_bytes(49152, 2048) < 2048 * 49152 * 4 / 2
    assert own_outputs.read_bytes(100, 50) == 4 * 100 * 99  # one block of the 49 rows that have a next token
    assert own_outputs.read_bytes(0, 2048) == own_outputs.read_bytes(100, 1) == 0  # no LM head; no next token


def _run(n=10, heads=True):
    return SimpleNamespace(attentions=np.zeros((L, H, n, n), np.float32), num_layers=L, n=n, is_dense=True,
                           head_outputs=np.zeros((L, H, n, DK), np.float32) if heads else None,
                           value_norms=np.zeros((L, H, n), np.float32))


def test_exports_and_comparison_are_counted_from_the_run():
    run = _run()
    attention, rest = L * H * 100 * 4, L * H * 10 * (DK + 1) * 4
    assert downloads.plan_npz(run).need.host == 3 * (attention + rest)
    assert downloads.plan_npz(run, float16=True).need.host == 3 * (attention // 2 + rest)
    assert downloads.report_need(run, 2) == 4 * H * 100 * 4 + 16 * 2 * 100


def test_a_path_larger_than_the_budget_is_refused_with_its_figures():
    """A generation of 2,000 tokens on the stand-in needs 4·6·4·2,000² bytes of attention alone (384 MB):
    an admission with 100 MiB of host memory refuses it at once, naming the memory and the advice."""
    need = needs.generation(_model(), 2000)
    slots = admission.Admission(0, budget=lambda place: 100 * MiB)
    with pytest.raises(admission.OverBudget) as refused:
        with slots.hold(need=need):
            pass
    assert str(refused.value).startswith(
        f"This analysis needs about {memory.settings.size_text(need.host)} of memory, "
        f"{memory.settings.size_text(need.host - 100 * MiB)} more than the 100.0 MiB this server has for analyses.")
    assert slots.running == 0


def test_an_analysis_past_the_dense_limit_is_priced_as_the_long_run_it_makes(monkeypatch):
    """`needs.analysis`: the dense capture's need while every head's array fits MHA_VIZ_DENSE_MB, else the scan's
    (what `analyze` runs then); a run of chosen layers stays dense. The estimate keeps the first text's summaries, not
    its dense array, while the second text runs."""
    n = 50
    dense_array = 4 * L * H * n * n
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", str(dense_array // 2**20 + 1))
    assert needs.analysis(_model(), n) == memory.analysis_need(_model(), n)
    assert needs.kept_bytes(_model(), n) == memory.run_bytes(_model(), n)
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    assert needs.analysis(_model(), n) == needs.scan(_model(), n)
    assert needs.analysis(_model(), n, layers=1) == memory.analysis_need(_model(), n, layers=1)
    summaries = 4 * L * H * (n * 17 + 48 * 48)  # each row's 8 keys and weights and its rest, a 48 × 48 thumbnail
    assert needs.kept_bytes(_model(), n) == summaries
    one = needs.scan(_model(), n)
    both = one.host + summaries
    assert prediction_need.estimate(_model(), n).host >= both
