"""Switch heads off with every head on, read off the analysis's own forward (`ablation_outcome.from_run`, the run's
`own` outputs): the same loss, top-k, sentence embedding and head means as the pass it replaces (run through the
model here, with fused attention), no forward at all when it applies, and the pass again wherever the run is not the
pass (another text, tokens hidden, a lean capture, half precision, a masked-LM encoder)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.capture.sinks import drop_tokens
from mha_viz.interventions import ablation_outcome as outcome

TEXT = "the cat sat on the mat and the dog sat on the log"


class _Forwards:
    """Counts the model's forwards (a hook on its top module)."""

    def __init__(self, model):
        self.model, self.count = model, 0

    def __enter__(self):
        self.handle = self.model.hf_model.register_forward_hook(lambda *_: setattr(self, "count", self.count + 1))
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def _probabilities(top) -> np.ndarray:
    """The top-k probabilities of each position, in order of value (which tokens they are may swap on a tie)."""
    return np.array([[p for _token, p in tokens] for _label, tokens in top])


@pytest.mark.model
@pytest.mark.parametrize("which", ["tiny_gpt2", "minilm"])
def test_every_head_on_read_off_the_run_equals_the_pass(request, which):
    model = request.getfixturevalue(which)
    run = mha_viz.analyze(model, TEXT)
    with _Forwards(model) as forwards:
        read = outcome.unablated(model, TEXT, run=run)
    assert forwards.count == 0  # nothing ran: the analysis's forward stood for the pass
    plain = outcome.unablated(model, TEXT)  # the pass itself
    assert read.loss == pytest.approx(plain.loss, abs=1e-5)
    np.testing.assert_allclose(_probabilities(read.top), _probabilities(plain.top), atol=1e-5)
    assert [label for label, _ in read.top] == [label for label, _ in plain.top]
    np.testing.assert_allclose(read.means[0].numpy(), plain.means[0].numpy(), atol=1e-5)
    if plain.embedding is not None:
        np.testing.assert_allclose(read.embedding.numpy(), plain.embedding.numpy(), atol=1e-5)
    else:
        assert read.embedding is None and len(read.top) == 1
    keep = np.ones((model.num_layers, model.num_heads), dtype=bool)
    keep[0, :2] = False
    for mean_ablation in (False, True):  # the heads-off Outcome built on either base is the same
        a = outcome.ablated(model, TEXT, keep, mean_ablation=mean_ablation, base=read)
        b = outcome.ablated(model, TEXT, keep, mean_ablation=mean_ablation, base=plain)
        assert a.loss == pytest.approx(b.loss, abs=1e-5)


def test_the_runs_own_loss_is_the_mean_next_token_cross_entropy(tiny_gpt2):
    """Against the logits of the model's own forward, written out here."""
    run = mha_viz.analyze(tiny_gpt2, TEXT)
    ids = torch.tensor([run.token_ids])
    with torch.no_grad():
        logits = tiny_gpt2.hf_model(input_ids=ids).logits[0].double()
    logp = logits.log_softmax(-1)
    expected = -float(np.mean([logp[t, run.token_ids[t + 1]] for t in range(len(run.token_ids) - 1)]))
    assert run.own.loss == pytest.approx(expected, abs=1e-5)
    np.testing.assert_allclose(run.own.last_logits, logits[-1].numpy(), atol=1e-4)


def test_where_the_run_is_not_the_pass_the_pass_runs(tiny_gpt2, tiny_bert, monkeypatch):
    run = mha_viz.analyze(tiny_gpt2, TEXT)
    assert outcome.from_run(tiny_gpt2, run, TEXT + " again") is None  # another text
    assert outcome.from_run(tiny_gpt2, drop_tokens(run, np.arange(run.n) == 0), TEXT) is None  # a token hidden
    lean = mha_viz.analyze(tiny_gpt2, TEXT, lean=True)  # the base model only: no logits
    assert lean.own is None and outcome.from_run(tiny_gpt2, lean, TEXT) is None
    masked = mha_viz.analyze(tiny_bert, TEXT)  # a masked-LM encoder scores its text with masks in
    assert outcome.from_run(tiny_bert, masked, TEXT) is None
    monkeypatch.setattr(tiny_gpt2, "dtype", torch.bfloat16)
    assert outcome.from_run(tiny_gpt2, run, TEXT) is None  # half precision: eager and fused round apart
    with _Forwards(tiny_gpt2) as forwards:
        monkeypatch.undo()
        outcome.unablated(tiny_gpt2, TEXT + " again", run=run)
    assert forwards.count == 1
