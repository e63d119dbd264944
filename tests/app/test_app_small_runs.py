"""A small analysis runs its forward on one PyTorch thread (`steps.ONE_THREAD_WORK`: as quick as on two, with about
half the CPU, what a class of MiniLM sentences spends most), a larger one on the process's count, unless another run
holds a turn (`steps.BUSY_ONE_THREAD_WORK`), and the count is the process's again after either. Read inside the model's
forward, through the app's own cached run (`steps.cached_run`), on the count 2 (on 1 the rule would change nothing)."""

from __future__ import annotations

import threading

import pytest
import torch

from mha_viz.budget import turns
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


def test_a_larger_analysis_runs_on_one_thread_while_another_run_holds_a_turn(minilm, monkeypatch):
    sentence = "The teacher wrote walruses on the board."
    monkeypatch.setattr(steps, "ONE_THREAD_WORK", minilm.num_params)  # no text small (a token's work)
    assert minilm.num_params * 20 < steps.BUSY_ONE_THREAD_WORK  # within the bound while another run computes
    taken, release = threading.Event(), threading.Event()

    def other_run() -> None:  # another session's run, in its turn of the process's
        with turns.turn():
            taken.set()
            release.wait(60)
    other = threading.Thread(target=other_run, daemon=True)
    other.start()
    try:
        assert taken.wait(60)
        assert _threads_in_forward(minilm, sentence) == [1]
        monkeypatch.setattr(steps, "BUSY_ONE_THREAD_WORK", minilm.num_params)  # past the bound: the process's
        assert _threads_in_forward(minilm, sentence.replace("walruses", "herons")) == [2]
    finally:
        release.set()
        other.join(60)
    assert not turns.others_compute()
    monkeypatch.setattr(steps, "BUSY_ONE_THREAD_WORK", 10**12)  # within it again, but no other run: the process's
    assert _threads_in_forward(minilm, sentence.replace("walruses", "beavers")) == [2]  # alone: the process's
    assert torch.get_num_threads() == 2 and torch_threads.process_count() == 2
