"""The weights-only results computed ahead of the Head composition page (`mha_viz.circuits.ahead`): once per
model, in a thread of its own once no run of the app computes, the same scores a page computes; a page that asks
while the thread works waits for it and computes nothing twice; a model whose scores take longer than AHEAD_S is left
to the page; a model that cannot give them leaves the page its message; a process that exits while the thread computes
exits cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import mha_viz
from mha_viz.budget import turns
from mha_viz.circuits import ahead, composition
from mha_viz.progress import Cancelled
from mha_viz.text.tokenize import InputError
from tests.helpers import ROOT
from tests.waiting import wait_until


@pytest.fixture
def llama(llama_dir):
    """A fresh load of the random-init Llama (grouped-query attention): nothing kept for it yet."""
    return mha_viz.load_model(str(llama_dir), device="cpu")


def test_the_thread_keeps_the_scores_the_page_reads_once_per_model(llama):
    assert not composition.composition_known(llama) and not composition.copying_known(llama)
    thread = ahead.start(llama)
    assert thread is not None and thread.daemon
    assert ahead.start(llama) is None  # once per model, however many pages are drawn
    thread.join(60)
    assert not thread.is_alive()
    assert composition.composition_known(llama) and composition.copying_known(llama)
    kept = composition.composition_scores(llama)
    composition._COMPOSED.pop(llama.hf_model)  # computed again from the weights: the same numbers
    again = composition.composition_scores(llama)
    for kind in composition.KINDS:
        np.testing.assert_array_equal(kept[kind], again[kind])


def test_the_thread_starts_once_no_run_of_the_app_holds_a_turn(llama, monkeypatch):
    """A class arriving on a server just started is served before the scores: the thread looks (`turns.quiet`) and
    computes nothing while another run holds one of the process's turns, and computes once it gives it back."""
    looked = []
    quiet = turns.quiet
    monkeypatch.setattr(turns, "quiet", lambda: looked.append(quiet()) or looked[-1])
    taken, release = threading.Event(), threading.Event()

    def a_run() -> None:  # a student's run, in its turn
        with turns.turn():
            taken.set()
            release.wait(60)
    run = threading.Thread(target=a_run, daemon=True)
    run.start()
    assert taken.wait(60)
    thread = ahead.start(llama)
    try:
        assert wait_until(lambda: looked.count(False) >= 2, 60)  # it looked twice while the run computed
        assert not composition.copying_known(llama) and not composition.composition_known(llama)
    finally:
        release.set()
        run.join(60)
    thread.join(60)
    assert looked[-1] and composition.copying_known(llama) and composition.composition_known(llama)


def test_a_page_asking_while_the_thread_computes_waits_and_nothing_runs_twice(llama, monkeypatch):
    inside, asked, release = threading.Event(), threading.Event(), threading.Event()
    calls = []
    pair_scores, computing = composition._pair_scores, composition._computing

    def held(*args, **kwargs):  # the thread's computation, held inside until the page has asked
        calls.append(threading.current_thread().name)
        inside.set()
        assert release.wait(60)
        return pair_scores(*args, **kwargs)

    class Watched:  # the model's lock, noting when the page asks for it
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            if threading.current_thread().name == "page":
                asked.set()
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)
    monkeypatch.setattr(composition, "_pair_scores", held)
    monkeypatch.setattr(composition, "_computing", lambda model: Watched(computing(model)))
    thread = ahead.start(llama)
    assert inside.wait(60)
    got = {}
    page = threading.Thread(target=lambda: got.update(composition.composition_scores(llama)), name="page")
    page.start()
    assert asked.wait(60)  # the page asks while the thread computes
    assert page.is_alive()  # and waits: the thread holds the lock
    release.set()
    page.join(60)
    thread.join(60)
    assert calls == [thread.name]  # computed once, by the thread: the page read what it kept
    for kind in composition.KINDS:
        np.testing.assert_array_equal(got[kind], composition.composition_scores(llama)[kind])


def test_the_copying_scores_come_first(llama, monkeypatch):
    """Every head table reads the copying scores: the thread computes them before the composition scores, so that
    a head table asking meanwhile waits for them alone."""
    done = []
    for name in ("_copying", "_pair_scores"):
        monkeypatch.setattr(composition, name, lambda *a, _f=getattr(composition, name), _n=name, **k:
                            (done.append(_n), _f(*a, **k))[1])
    for kept in (composition._COPYING, composition._COMPOSED):
        monkeypatch.delitem(kept, llama.hf_model, raising=False)
    ahead.compute(llama)
    assert done == ["_copying", "_pair_scores"]
    assert composition.copying_known(llama) and composition.composition_known(llama)


def test_a_model_without_copying_scores_still_gets_its_composition_scores():
    """MiniLM has no masked-LM head, so no copying scores: their refusal, computed first, leaves the composition
    scores and their baseline to be computed all the same."""
    minilm = mha_viz.load_model("minilm", device="cpu")  # a fresh load: nothing kept for it yet
    with pytest.raises(InputError):
        composition.copying_scores(mha_viz.load_model("minilm", device="cpu"))  # the refusal, on another load
    ahead.compute(minilm)
    assert composition.copying_known(minilm) and composition.composition_known(minilm)


def test_a_model_whose_scores_take_long_is_left_to_the_page(llama, monkeypatch):
    monkeypatch.setattr(composition, "composition_seconds", lambda model: ahead.AHEAD_S + 1)
    assert ahead.start(llama) is None
    assert not composition.composition_known(llama)


def test_a_model_without_one_stream_leaves_the_page_its_message(t5_dir, caplog):
    t5 = mha_viz.load_model(str(t5_dir), device="cpu")
    thread = ahead.start(t5)
    if thread is not None:
        thread.join(60)
    assert not composition.composition_known(t5)
    assert "Traceback" not in caplog.text


def test_a_model_whose_shapes_cannot_be_read_starts_nothing_and_raises_nothing(llama, monkeypatch, caplog):
    """Called after every run of the app: whatever fails before the thread starts is one line in the log, never
    an exception for the page's frame to show."""
    def broken(model):
        raise AttributeError("no d_k")
    monkeypatch.setattr(composition, "composition_seconds", broken)
    assert ahead.start(llama) is None
    assert "did not start: AttributeError: no d_k" in caplog.text


def test_scores_stopped_between_two_layers_keep_nothing(llama):
    told = []

    def stop_at_the_last(fraction, message):  # told before each layer's factors, then before each layer's pairs
        told.append(message)  # (from the second layer to the last)
        return not message.endswith(f"layer {llama.num_layers} of {llama.num_layers}")
    with pytest.raises(Cancelled):
        composition.composition_scores(llama, progress=stop_at_the_last)
    layers = llama.num_layers
    assert told[:layers] == [f"composition scores: the factors of layer {i + 1}" for i in range(layers)]
    assert len(told) == 2 * llama.num_layers - 1 and not composition.composition_known(llama)
    composition.composition_scores(llama)  # asked again: computed whole
    assert composition.composition_known(llama)


def test_copying_scores_stopped_between_two_parts_keep_nothing(llama):
    """W_U W_E over a vocabulary is the copying scores' longest step (SmolLM2's: 33 GFLOP in float64, 10 s on a busy
    machine, past the exit's wait): it is made in parts, and the thread's exit stops it between two."""
    told = []

    def stop_at_the_fifth(fraction, message):
        told.append(message)
        return len(told) < 5
    with pytest.raises(Cancelled):
        composition.copying_scores(llama, progress=stop_at_the_fifth)
    assert told[:4] == ["copying scores: the unembedding", "copying scores: the embeddings",
                        *[f"copying scores: the unembedding, part {k} of {composition.COPYING_PARTS}" for k in (1, 2)]]
    assert len(told) == 5 and not composition.copying_known(llama)
    steps = 2 + composition.COPYING_PARTS + llama.num_layers
    with pytest.raises(Cancelled, match=f"after 0 of {steps} parts"):  # stopped at once: how many it was to do
        composition.copying_scores(llama, progress=lambda fraction, message: False)
    fractions = []
    composition.copying_scores(llama, progress=lambda fraction, message: fractions.append(fraction) or True)
    assert composition.copying_known(llama)  # asked again: computed whole, told before every step
    assert len(fractions) == 2 + composition.COPYING_PARTS + llama.num_layers
    assert all(type(f) is float for f in fractions) and fractions == sorted(set(fractions))
    assert 0 == fractions[0] and fractions[-1] < 1


def test_a_process_that_exits_while_the_thread_computes_exits_cleanly():
    """SmolLM2's scores take seconds: the script's last line runs while the thread computes. Until stop 107 the
    interpreter shut down around it, inside PyTorch, and the process aborted (exit 134) after printing its results."""
    code = ("import mha_viz; from mha_viz.circuits import ahead; "
            "thread = ahead.start(mha_viz.load_model('smollm2', device='cpu')); print('computing', thread.is_alive())")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=300, check=False)
    assert "computing True" in done.stdout, (done.stdout, done.stderr[-2000:])
    assert done.returncode == 0 and "terminate called" not in done.stderr, (done.returncode, done.stderr[-2000:])
