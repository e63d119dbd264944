"""A model's stream layout (`reading.stream.layout`) is discovered once however many sessions ask at the same moment
(a class arriving on a server just started, each opening *Why here?*): the first runs the probe, the others wait for
it and read what it found. The probe is held open until the test has given every other thread time to reach it, so
that threads that each ran their own would be counted."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from mha_viz_models.reading import stream
from tests.waiting import wait_until

ASKING = 8


class _Weights:
    """A stand-in for a model's weights: the layouts are kept by a weak reference to them."""


def test_sessions_asking_at_once_share_one_discovery(monkeypatch):
    model = SimpleNamespace(hf_model=_Weights(), name="stand-in")
    found = [object()]
    ran: list[int] = []
    release = threading.Event()

    def probe(loaded):
        ran.append(1)
        assert release.wait(30), "the test never released the probe"
        return found
    monkeypatch.setattr(stream, "_refusal", lambda loaded: None)
    monkeypatch.setattr(stream, "_discover", probe)
    start = threading.Barrier(ASKING)
    got: list = []

    def ask():
        start.wait(30)
        got.append(stream.layout(model))
    threads = [threading.Thread(target=ask) for _ in range(ASKING)]
    for t in threads:
        t.start()
    assert wait_until(lambda: ran, 30)  # the first probe runs
    # the others had a second to start their own (each would add to `ran`): none may
    wait_until(lambda: len(ran) == ASKING, 1.0)
    release.set()
    for t in threads:
        t.join(30)
    assert len(ran) == 1
    assert len(got) == ASKING and all(g is found for g in got)
    assert stream.layout(model) is found  # kept: no probe again
    assert len(ran) == 1
