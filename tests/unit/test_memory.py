"""Memory before it runs, without a model or a GPU: the estimate of one analysis against a hand
computation, and admission by bytes against a simulated budget (threads made deterministic
with events: no sleeps, no clocks)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch

import mha_viz
from mha_viz.budget import admission, memory

MiB = 2**20


def _model(device="cpu", heads_readable=True):
    """What the estimate reads of a model: 6 layers, 4 heads of d_k 8 (d_model 32), vocabulary 100."""
    return SimpleNamespace(num_layers=6, num_heads=4, d_model=32, d_k=8, device=torch.device(device),
                           has_head_outputs=heads_readable, can_recompute=heads_readable,
                           hf_model=SimpleNamespace(config=SimpleNamespace(vocab_size=100)),
                           attention_bytes=lambda n, layers=None, batch=1: (
                               (6 if layers is None else layers) * 4 * n * n * 4))


def test_the_estimate_against_a_hand_computation(monkeypatch):
    n = 10
    # host: per layer kept, probabilities 4·10², head outputs 4·10·8, value norms 4·10 floats
    per_layer_host = 4 * 4 * (100 + 80 + 10)
    # device, besides the probabilities: inputs and outputs 2·6·10·32, working 8·10·32, logits 10·100
    rest = 4 * (3840 + 2560 + 1000)
    every, in_flight = 4 * 6 * 4 * 100, 4 * 3 * 4 * 100  # probabilities of all 6 layers / of IN_FLIGHT = 3
    # eager only: every layer's hidden state and values 2·6·10·32, the running layer's scores 3·4·10²
    eager = 4 * (3840 + 1200)
    assert memory.IN_FLIGHT == 3
    # a small full capture is eager (`capture.chooses_lean`): the model returns every layer at once
    assert memory.analysis_need(_model(), n) == memory.Need(host=6 * per_layer_host + every + eager + rest,
                                                            attention=every)
    # one layer is captured the lean way: three layers in flight at most
    one = memory.analysis_need(_model(), n, layers=1)
    assert one == memory.Need(host=per_layer_host + in_flight + rest, attention=4 * 4 * 100)
    # above LEAN_ABOVE_BYTES a full capture is lean too
    monkeypatch.setattr(mha_viz.budget.memory, "LEAN_ABOVE_BYTES", 0)
    assert memory.analysis_need(_model(), n).host == 6 * per_layer_host + in_flight + rest
    # an architecture whose heads cannot be read is always eager
    assert memory.analysis_need(_model(heads_readable=False), n).host == 6 * per_layer_host + every + eager + rest
    monkeypatch.setattr(mha_viz.budget.memory, "LEAN_ABOVE_BYTES", 2**30)
    # on a GPU the working part is the device's, the run's the host's; eager adds the stack sent in one transfer
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert memory.analysis_need(_model("cuda"), n) == memory.Need(
        host=6 * per_layer_host, gpu=every + every + eager + rest, device="cuda:0", attention=every)
    # a model without a language-model head makes no logits
    headless = _model()
    headless.hf_model.get_output_embeddings = lambda: None
    assert memory.logits_width(headless) == 0 and memory.logits_width(_model()) == 100
    assert memory.analysis_need(headless, n).host == 6 * per_layer_host + every + eager + rest - 4 * 1000


def test_the_shortfall_names_the_memory_that_is_short_and_by_how_much():
    need = memory.Need(host=3 * MiB, gpu=5 * 2**30, device="cuda:0", attention=MiB)
    room = memory.Room(capture=2 * MiB, host=4 * MiB, gpu=4 * 2**30, device="cuda:0")
    assert memory.shortfall(need, room) == ("about 5.0 GiB of GPU memory (cuda:0), 1.0 GiB more than the "
                                            "4.0 GiB free there for analyses")
    assert memory.shortfall(need, memory.Room(capture=2 * MiB, host=2 * MiB, gpu=8 * 2**30, device="cuda:0")) == (
        "about 3.0 MiB of memory, 1.0 MiB more than the 2.0 MiB this machine has available")
    assert memory.shortfall(memory.Need(host=MiB, attention=3 * MiB), room) == (
        "3.0 MiB of attention, 1.0 MiB more than the limit here (2.0 MiB, MHA_VIZ_MAX_CAPTURE_MB)")
    assert memory.shortfall(memory.Need(host=MiB, attention=MiB), room) == ""


def test_the_room_reads_the_gpu_free_memory_and_the_setting(monkeypatch):
    monkeypatch.setattr(memory, "host_available", lambda: 64 * MiB)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (100 * MiB, 1000 * MiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 30 * MiB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 10 * MiB)
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "16")
    # free on the card, plus what the caching allocator holds reserved but unused
    assert memory.room("cuda:1") == memory.Room(capture=16 * MiB, host=64 * MiB, gpu=120 * MiB, device="cuda:1")
    monkeypatch.setenv("MHA_VIZ_GPU_BUDGET_MB", "50")
    assert memory.room("cuda:1").gpu == 50 * MiB
    assert memory.room("cpu") == memory.Room(capture=16 * MiB, host=64 * MiB)


def test_layers_that_fit():
    n, model = 10, _model()
    one = memory.analysis_need(model, n, layers=1)
    room = memory.Room(capture=2**40, host=one.host)
    assert memory.layers_that_fit(model, n, room) == 1
    assert memory.layers_that_fit(model, n, memory.Room(capture=2**40, host=one.host - 1)) == 0


GPU = "cuda:0"


def _admission(budget_mb: int = 100, limit: int = 0) -> admission.Admission:
    """An admission whose GPU has `budget_mb` MiB for analyses and whose host has plenty."""
    return admission.Admission(limit, budget=lambda place: budget_mb * MiB if place == GPU else 2**40)


def _gpu(mb: int) -> memory.Need:
    return memory.Need(host=MiB, gpu=mb * MiB, device=GPU)


def _held(slots: admission.Admission, mb: int, order: list, *,
          host: int = MiB) -> tuple[threading.Event, threading.Thread]:
    """A thread holding `mb` MiB of the GPU (and `host` bytes of the host) until the returned event is set (it
    is admitted when this returns); it writes "first done" to `order` before it gives the memory back."""
    admitted, release = threading.Event(), threading.Event()

    def first():
        with slots.hold(need=memory.Need(host=host, gpu=mb * MiB, device=GPU)):
            admitted.set()
            release.wait(60)
            order.append("first done")

    worker = threading.Thread(target=first)
    worker.start()
    assert admitted.wait(60)
    return release, worker


def test_two_requests_over_the_budget_together_are_not_both_admitted():
    """The first (60 of 100 MiB) runs; the second (60 MiB) is told the server is busy, and why,
    until the first finishes; then it is admitted and runs."""
    slots = _admission(100)
    order = []
    first_may_finish, worker = _held(slots, 60, order)
    with pytest.raises(admission.Busy) as busy:
        with slots.hold(need=_gpu(60)):
            order.append("second ran too early")
    assert str(busy.value) == ("the 1 analyses running hold 60.0 MiB of the 100.0 MiB of GPU memory (cuda:0) "
                               "this server has for analyses, and yours needs 60.0 MiB")
    assert slots.admitted[GPU] == 60 * MiB
    with slots.hold(need=_gpu(40)):  # what fits beside it is admitted
        assert slots.admitted[GPU] == 100 * MiB

    second_in = threading.Event()

    def second():  # waits its turn, as a page does (one_at_a_time)
        while True:
            try:
                with slots.hold(need=_gpu(60)):
                    order.append("second runs")
                    second_in.set()
                return
            except admission.Busy as exc:
                slots.wait(10, busy=exc)

    waiting = threading.Thread(target=second)
    waiting.start()
    first_may_finish.set()
    worker.join(10)
    assert second_in.wait(60)
    waiting.join(10)
    assert order == ["first done", "second runs"]
    assert slots.running == 0 and slots.admitted[GPU] == 0


def test_a_waiting_hold_is_admitted_after_the_other_finishes():
    """The second hold blocks, and only then does the first finish: the first is told to finish from
    inside the second's admission check (its reading of the host's budget, which nothing else holds),
    and it can give its memory back only once the second waits (both need the admission's lock)."""
    order, release = [], None

    def read(place):
        if place == memory.HOST and release is not None:  # the second asks, holding the lock
            order.append("second checks")
            release.set()
        return 100 * MiB if place == GPU else 2**40

    slots = admission.Admission(0, budget=read)
    release, worker = _held(slots, 80, order, host=0)  # the GPU only: the host's budget is read at each check
    with slots.hold(wait=True, need=_gpu(80)):
        order.append("second runs")
    worker.join(10)
    assert order[0] == "second checks" and order[1:].count("first done") == 1
    assert order[-1] == "second runs" and order.index("first done") < order.index("second runs")


def test_a_request_over_the_whole_budget_is_refused_at_once_even_when_it_would_wait():
    slots = _admission(100)
    for wait in (False, True):
        with pytest.raises(mha_viz.InputError) as refused:
            with slots.hold(wait=wait, need=_gpu(150)):
                pass
        assert str(refused.value).startswith(
            "This analysis needs about 150.0 MiB of GPU memory (cuda:0), 50.0 MiB more than the 100.0 MiB this "
            "server has for analyses. Lower the token limit")
    assert slots.running == 0


def test_the_count_limit_still_applies_to_what_declares_no_bytes():
    slots = _admission(100, limit=1)
    with slots.hold():
        with pytest.raises(admission.Busy, match=r"1 analyses are running \(at most 1 at once\)"):
            with slots.hold(need=_gpu(1)):
                pass


def test_the_budget_is_read_when_nothing_runs_and_kept_while_work_runs():
    """What is free while an analysis runs is lowered by that analysis: the budget is the reading
    taken before it, so that a second one is not measured against the first's leftovers."""
    free = [100 * MiB]
    slots = admission.Admission(0, budget=lambda place: free[0] if place == GPU else 2**40)
    with slots.hold(need=_gpu(40)):
        free[0] = 60 * MiB  # the first analysis took its part
        assert slots.budget(GPU) == 100 * MiB
        with slots.hold(need=_gpu(60)):  # fits the 100 MiB read before the first
            assert slots.admitted[GPU] == 100 * MiB
        free[0] = 30 * MiB  # something else took memory meanwhile
    assert slots.budget(GPU) == 30 * MiB  # read again once nothing runs
