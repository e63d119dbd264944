"""The circuit page's needs (`prediction_need.circuit`, `prediction_need.path_patched`) on a random-init GPT-2: the
figure `edges.check_budget` refuses by (gradient passes and every receiver's input), or the batches
of patched runs, whichever is larger."""

from __future__ import annotations

from mha_viz.budget import capture_budget, plan
from mha_viz.circuits import edges, path_patching
from mha_viz.circuits import need as prediction_need
from mha_viz.interventions import ablation
from mha_viz_models.reading import readout


def test_the_circuit_declares_what_its_budget_check_counts(tiny_gpt2, monkeypatch):
    n, g = 12, edges.graph(tiny_gpt2)
    rows = 1 if readout.keeps_last_logits(tiny_gpt2.hf_model) else None
    eap = ablation.gradient_bytes(tiny_gpt2, n, logit_rows=rows) + edges.receiver_bytes(tiny_gpt2, g, n)
    batches = min(path_patching.BATCH_BYTES, capture_budget.capture_budget()) + edges.receiver_bytes(tiny_gpt2, g, n)
    assert prediction_need.circuit(tiny_gpt2, n).host == max(eap, batches)
    monkeypatch.setattr(path_patching, "BATCH_BYTES", 0)  # the gradient pass decides
    assert prediction_need.circuit(tiny_gpt2, n).host == eap
    # EAP-IG runs as many of its steps side by side as fit (`edges.fitting_rows`)
    side = edges.fitting_rows(tiny_gpt2, g, n, 5)
    assert side > 1
    assert prediction_need.circuit(tiny_gpt2, n, method="eap-ig").host == (
        side * ablation.gradient_bytes(tiny_gpt2, n, logit_rows=rows) + edges.receiver_bytes(tiny_gpt2, g, n, side))
    assert prediction_need.path_patched(tiny_gpt2, n).host == (
        edges.receiver_bytes(tiny_gpt2, g, n) + plan.forward_bytes(tiny_gpt2, n, rows=2))
