"""Turns of one server process (`mha_viz.budget.turns`): at most `size` runs compute at once; a turn given back
goes to the waiter of lowest rank (a session's later step before a newcomer's first), in the order they asked among
equal ranks; a run waiting for other work (`away`, an admission's wait) lets another take its turn and comes back
first; and no turn is a trap: when none changes hands for the stall time, a waiter goes ahead without one.

The threads are ordered by events and by polling what the turns report (`waiting`), never by sleeping; the stall
is driven by a planted clock."""

from __future__ import annotations

import threading

import pytest

from mha_viz.budget import admission, memory, turns
from tests.waiting import wait_until

DEADLINE_S = 30  # for what takes milliseconds (a loaded machine)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def in_thread(fn) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def holder(t: turns.Turns, taken: threading.Event, release: threading.Event, rank: float = 0.0):
    """A thread that takes a turn, says so, and keeps it until `release`."""
    def run() -> None:
        with t.turn(rank):
            taken.set()
            release.wait(DEADLINE_S)
    return in_thread(run)


def test_at_most_size_runs_hold_a_turn_at_once():
    t = turns.Turns(2, stall_s=3600)
    lock, inside, most, took_all = threading.Lock(), [0], [0], []
    release = threading.Event()

    def run() -> None:
        with t.turn() as took:
            took_all.append(took)
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            release.wait(DEADLINE_S)
            with lock:
                inside[0] -= 1

    threads = [in_thread(run) for _ in range(6)]
    assert wait_until(lambda: t.waiting() == 4 and inside[0] == 2, DEADLINE_S)
    release.set()
    for thread in threads:
        thread.join(DEADLINE_S)
    assert most[0] == 2 and inside[0] == 0
    assert took_all == [True] * 6  # each in a turn of its own, none gone ahead
    assert t.free == 2 and t.waiting() == 0  # every turn back


def test_a_turn_given_back_goes_to_the_lowest_rank_then_the_first_to_ask():
    t = turns.Turns(1, stall_s=3600)
    taken, release = threading.Event(), threading.Event()
    first = holder(t, taken, release)
    assert taken.wait(DEADLINE_S)
    order: list[str] = []

    def waiter(name: str, rank: float):
        def run() -> None:
            with t.turn(rank):
                order.append(name)
        return run

    threads = []
    for i, (name, rank) in enumerate([("newcomer", 5.0), ("older", 1.0), ("middle", 3.0), ("older, later", 1.0)]):
        threads.append(in_thread(waiter(name, rank)))
        assert wait_until(lambda: t.waiting() == i + 1, DEADLINE_S)  # each asks before the next
    release.set()
    for thread in [first, *threads]:
        thread.join(DEADLINE_S)
    assert order == ["older", "older, later", "middle", "newcomer"]


def test_away_lets_another_run_take_the_turn_and_comes_back_before_the_others():
    t = turns.Turns(1, stall_s=3600)
    order: list[str] = []
    in_away, leave_away, b_release = threading.Event(), threading.Event(), threading.Event()

    def a() -> None:
        with t.turn(0.0):
            order.append("a")
            with t.away():
                in_away.set()
                leave_away.wait(DEADLINE_S)
            order.append("a again")

    a_thread = in_thread(a)
    assert in_away.wait(DEADLINE_S)
    b_taken = threading.Event()
    b_thread = holder(t, b_taken, b_release, rank=1.0)
    assert b_taken.wait(DEADLINE_S)  # a's turn, while a waits away
    def c() -> None:
        with t.turn(2.0):
            order.append("c")

    c_thread = in_thread(c)
    assert wait_until(lambda: t.waiting() == 1, DEADLINE_S)  # c waits for b
    leave_away.set()
    assert wait_until(lambda: t.waiting() == 2, DEADLINE_S)  # a asks again, behind b
    b_release.set()
    for thread in (a_thread, b_thread, c_thread):
        thread.join(DEADLINE_S)
    assert order == ["a", "a again", "c"]  # a came back before c, who asked first


def test_a_waiter_goes_ahead_only_when_no_turn_changed_hands_for_the_stall_time():
    clock = Clock()
    t = turns.Turns(1, stall_s=2.0, clock=clock)
    clock.now += 3600  # a server idle for an hour: a turn just taken is not a stalled one
    taken, release = threading.Event(), threading.Event()
    first = holder(t, taken, release)
    assert taken.wait(DEADLINE_S)
    got: list[bool] = []

    def second_run() -> None:
        with t.turn() as took:
            got.append(took)

    second = in_thread(second_run)
    assert wait_until(lambda: t.waiting() == 1, DEADLINE_S)
    clock.now += 1.9  # within the stall time: it keeps waiting
    second.join(0.5)
    assert second.is_alive() and got == []
    clock.now += 0.2  # the holder has kept its turn past the stall time
    second.join(DEADLINE_S)
    assert got == [False] and not second.is_alive()  # went ahead without a turn
    assert t.waiting() == 0
    release.set()
    first.join(DEADLINE_S)
    assert t.free == 1  # the holder gave its turn back; the one gone ahead had none to give


def test_a_run_waiting_for_an_admission_gives_its_turn_to_another_session(monkeypatch):
    t = turns.Turns(1, stall_s=3600)
    monkeypatch.setattr(turns, "TURNS", t)
    slots = admission.Admission(1, budget=lambda place: 2**40)
    busy_release, busy_in = threading.Event(), threading.Event()

    def heavy() -> None:  # another session's heavy work, holding the one slot
        with slots.hold(need=memory.Need(host=1)):
            busy_in.set()
            busy_release.wait(DEADLINE_S)

    heavy_thread = in_thread(heavy)
    assert busy_in.wait(DEADLINE_S)
    order: list[str] = []
    held_when_admitted: list[bool] = []
    entered = threading.Event()

    def waits_for_admission() -> None:
        with turns.turn(0.0):
            entered.set()
            with slots.hold(wait=True, need=memory.Need(host=1)):
                order.append("admitted")
                held_when_admitted.append(t.holds())

    a_thread = in_thread(waits_for_admission)
    assert entered.wait(DEADLINE_S)
    assert wait_until(lambda: t.free == 1, DEADLINE_S)  # its turn given back while it waits
    other_taken, other_release = threading.Event(), threading.Event()
    other = holder(t, other_taken, other_release, rank=1.0)
    assert other_taken.wait(DEADLINE_S)  # another session's run computes meanwhile
    busy_release.set()
    assert wait_until(lambda: t.waiting() == 1, DEADLINE_S)  # admitted, it waits for its turn back
    other_release.set()
    for thread in (heavy_thread, a_thread, other):
        thread.join(DEADLINE_S)
    assert order == ["admitted"] and t.free == 1
    assert held_when_admitted == [True]  # its turn back once admitted


@pytest.mark.parametrize("wait_kind", ["busy", "slot"])
def test_the_pages_wait_for_a_busy_server_gives_the_turn_back(monkeypatch, wait_kind):
    t = turns.Turns(1, stall_s=3600)
    monkeypatch.setattr(turns, "TURNS", t)
    slots = admission.Admission(1, budget=lambda place: 2**40)
    held_release = threading.Event()
    held_in = threading.Event()

    def heavy() -> None:
        with slots.hold():
            held_in.set()
            held_release.wait(DEADLINE_S)

    heavy_thread = in_thread(heavy)
    assert held_in.wait(DEADLINE_S)
    with pytest.raises(admission.Busy) as busy:
        with slots.hold():
            pass
    waited, entered = threading.Event(), threading.Event()

    def page() -> None:  # as `one_at_a_time`: Busy, a notice, then wait
        with turns.turn(0.0):
            entered.set()
            slots.wait(timeout=DEADLINE_S, busy=busy.value if wait_kind == "busy" else None)
            waited.set()

    page_thread = in_thread(page)
    assert entered.wait(DEADLINE_S)
    assert wait_until(lambda: t.free == 1 and not waited.is_set(), DEADLINE_S)
    held_release.set()
    for thread in (heavy_thread, page_thread):
        thread.join(DEADLINE_S)
    assert waited.is_set() and t.free == 1


def test_others_hold_counts_the_turns_of_other_threads_and_one_handed_on():
    t = turns.Turns(2, stall_s=3600)
    assert not t.others_hold()
    with t.turn():
        assert not t.others_hold()  # this thread's own turn is not another run's
        taken, release = threading.Event(), threading.Event()
        first = holder(t, taken, release)
        assert taken.wait(DEADLINE_S)
        assert t.others_hold()
        # a third waits; the second's turn goes straight to it (never free between them)
        taken3, release3 = threading.Event(), threading.Event()
        third = holder(t, taken3, release3)
        assert wait_until(lambda: t.waiting() == 1, DEADLINE_S)
        release.set()
        first.join(DEADLINE_S)
        assert taken3.wait(DEADLINE_S) and t.others_hold()
        release3.set()
        third.join(DEADLINE_S)
        assert not t.others_hold() and t.free == 1
    taken, release = threading.Event(), threading.Event()
    other = holder(t, taken, release)
    assert taken.wait(DEADLINE_S)
    assert t.others_hold()  # seen from a thread that holds none
    release.set()
    other.join(DEADLINE_S)
    assert not t.others_hold() and t.free == 2


def test_quiet_while_no_run_holds_or_waits_for_a_turn():
    t = turns.Turns(1, stall_s=3600)
    assert t.quiet()
    taken, release = threading.Event(), threading.Event()
    first = holder(t, taken, release)
    assert taken.wait(DEADLINE_S) and not t.quiet()
    taken2, release2 = threading.Event(), threading.Event()
    second = holder(t, taken2, release2)
    assert wait_until(lambda: t.waiting() == 1, DEADLINE_S)
    release.set()
    first.join(DEADLINE_S)
    assert taken2.wait(DEADLINE_S) and not t.quiet()  # handed on: never quiet between the two
    release2.set()
    second.join(DEADLINE_S)
    assert t.quiet()
