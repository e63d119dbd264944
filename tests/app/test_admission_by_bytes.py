"""Two sessions on one simulated memory budget (AppTest): session A's analysis of a long text (a long run:
MHA_VIZ_DENSE_MB=0, admitted by its scan's bytes) holds most of the budget; session B's, which would not fit
beside it, shows "The server is busy" with the figures and waits; when A's finishes, B's runs and shows its
result. Threads ordered by events, no timers: A's scan waits inside its admission until B has been told to
wait."""

from __future__ import annotations

import threading

import pytest

import mha_viz
from mha_viz import needs
from mha_viz.budget import admission, memory
from mha_viz.scan import long_run
from mha_viz.ui.kit import keys, resources
from tests.app.helpers import start_app

pytestmark = pytest.mark.model
TEXT_A = "The keys to the old wooden cabinet are missing again, said Mary, and John looked in the hall. " * 3
TEXT_B = "A second visitor scans another text while the first one is still running on the server. " * 3


class Planted(admission.Admission):
    """An admission whose budget is set by the test, and which says when a request starts waiting."""

    def __init__(self) -> None:
        self.host = 2**40  # plenty while the sessions start
        self.waiting = threading.Event()
        super().__init__(0, budget=lambda place: self.host)

    def wait(self, timeout: float = 1.0, *, busy: admission.Busy | None = None) -> None:
        self.waiting.set()
        super().wait(timeout, busy=busy)


class Notices:
    """`resources.st` with every placeholder's `info` recorded (the busy notice is emptied once the
    request runs, so the page's final state no longer shows it)."""

    def __init__(self, st) -> None:
        self.st, self.shown = st, []

    def __getattr__(self, name):
        return getattr(self.st, name)

    def empty(self):
        placeholder, shown = self.st.empty(), self.shown

        class Recorded:
            def __getattr__(self, name):
                return getattr(placeholder, name)

            def info(self, body, **kwargs):
                shown.append(body)
                return placeholder.info(body, **kwargs)
        return Recorded()


def test_a_request_that_does_not_fit_beside_another_waits_with_a_notice_then_runs(monkeypatch):
    planted = Planted()
    monkeypatch.setattr(resources, "slots", lambda: planted)
    notices = Notices(resources.st)
    monkeypatch.setattr(resources, "st", notices)
    sessions = {"A": start_app(), "B": start_app()}  # on the default text, before every analysis is a long run
    log, a_in, a_go = [], threading.Event(), threading.Event()
    real = long_run.scan
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")  # every analysis a long run: one scan each

    def scan(model, text, **kwargs):
        log.append(("start", text[:5]))
        if text == TEXT_A:
            a_in.set()
            assert a_go.wait(120)
        out = real(model, text, **kwargs)
        log.append(("end", text[:5]))
        return out
    monkeypatch.setattr(long_run, "scan", scan)

    texts = {"A": TEXT_A, "B": TEXT_B}
    model = mha_viz.load_model("minilm", device="cpu")
    need_a, need_b = (needs.scan(model, mha_viz.tokenize(model, t).n).host for t in (TEXT_A, TEXT_B))
    planted.host = max(need_a, need_b) + min(need_a, need_b) // 2  # either fits alone, not both at once

    def click(name):
        sessions[name].text_area(key=keys.TEXT).input(texts[name]).run()

    runners = {name: threading.Thread(target=click, args=(name,), daemon=True) for name in sessions}
    try:
        runners["A"].start()
        assert a_in.wait(120)  # A is admitted, holding need_a of the budget
        assert planted.admitted == {memory.HOST: need_a}
        runners["B"].start()
        assert planted.waiting.wait(120)  # B was refused for now and waits its turn
        assert ("start", TEXT_B[:5]) not in log
        size = mha_viz.settings.size_text
        assert notices.shown == [f"The server is busy: the 1 analyses running hold {size(need_a)} of the "
                                 f"{size(planted.host)} of memory this server has for analyses, and yours needs "
                                 f"{size(need_b)}. Yours starts as soon as one finishes."]
    finally:
        a_go.set()
    for runner in runners.values():
        runner.join(240)
        assert not runner.is_alive()
    assert log == [("start", TEXT_A[:5]), ("end", TEXT_A[:5]), ("start", TEXT_B[:5]), ("end", TEXT_B[:5])]
    for at in sessions.values():
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    for name, at in sessions.items():  # each session its own long run, of its own text
        run = at.session_state[keys.CURRENT].run
        assert not run.is_dense and run.summary is not None and run.text == texts[name]
    assert planted.running == 0 and planted.admitted == {memory.HOST: 0}
