"""A small analysis runs its forward on one PyTorch thread (`steps.ONE_THREAD_WORK`: as quick as on two, with about
half the CPU, what a class of MiniLM sentences spends most), a larger one on the process's count, and the count is the
process's again after either. Read inside the model's forward, through the app's own cached run (`steps.cached_run`),
on the count 2 (on 1 the rule would change nothing)."""

from __future__ import annotations

import pytest
import torch

from mha_viz.scan import torch_threads
from mha_viz.ui.kit.analysis_key import AnalysisKey
from mha_viz.ui.shell import steps

pytestmark = [pytest.mark.model, pytest.mark.usefixtures("two_torch_threads")]


def _threads_in_forward(model, text: str) -> list[int]:
    """The PyTorch thread count each forward of `model` read while the app's cached run of `text` computed."""
    seen: list[int] = []
    hook = model.hf_model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    try:
        steps.cached_run(AnalysisKey(steps.model_key_of(model, False), text, 512), model)  # a text not run before
    finally:
        hook.remove()
    return seen


def test_a_small_analysis_runs_on_one_thread_and_a_larger_on_the_process_count(minilm, monkeypatch):
    sentence = "The teacher wrote zebras on the board."
    n = steps.plan_of(AnalysisKey(steps.model_key_of(minilm, False), sentence, 512), minilm).n
    assert steps.on_one_thread(minilm, n)  # MiniLM's 22.7 M parameters × 10 tokens: 0.2 G
    assert _threads_in_forward(minilm, sentence) == [1]
    assert torch.get_num_threads() == 2 and torch_threads.process_count() == 2
    monkeypatch.setattr(steps, "ONE_THREAD_WORK", minilm.num_params * n)  # as long a text, no longer small
    assert _threads_in_forward(minilm, sentence.replace("zebras", "otters")) == [2]
    assert torch.get_num_threads() == 2 and torch_threads.process_count() == 2
