"""Turns: how many runs of the app's script compute at once in one server process.

Streamlit runs every session's script in a thread of its own, and the threads of one process share one
interpreter lock. When a class arrives at once, hundreds of runs take that lock in turn, every few
milliseconds each, and each run's messages wait for the event loop to get it too: every run ends late, the
first student's nearly as late as the last. Here a run waits for a turn (`turn`), at most `RUNS_AT_ONCE` at a
time, a session's later runs before newcomers' first (the rank `main` gives: when the session began), then in the
order they asked; a waiting thread sleeps on a lock of its own and does not compete. The first students are then
done first, each step after the other, instead of every student at the end.

A turn is never a trap:
- a run that waits for something long (an admission for heavy work, `away`) gives its turn back meanwhile;
- when no turn has changed hands for `STALL_S` (the runs holding them are in long work: a model's load, a
  long text's analysis), a waiting run goes ahead without one, as every run did before.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

RUNS_AT_ONCE = max(1, int(os.environ.get("MHA_VIZ_RUNS_AT_ONCE", "2")))  # the turns of one process
STALL_S = 2.0  # no turn taken or given back for this long: a waiting run goes ahead without one


class _Ticket:
    """A waiting thread's place: its rank, then the order it asked in; its event set once a turn is handed to it,
    `gone` once it went ahead without one."""

    __slots__ = ("key", "event", "gone")

    def __init__(self, key: tuple[float, int]) -> None:
        self.key, self.event, self.gone = key, threading.Event(), False

    def __lt__(self, other: "_Ticket") -> bool:
        return self.key < other.key


class Turns:
    """At most `size` holders at once. A turn given back goes to the waiter of lowest rank (the order they asked
    in among equal ranks); a waiter goes ahead without a turn once none has changed hands for `stall_s`
    seconds. `clock`: the time (tests plant their own)."""

    def __init__(self, size: int, stall_s: float, clock=time.monotonic) -> None:
        self.stall_s, self._clock = stall_s, clock
        self.size = self.free = size
        self._waiting: list[_Ticket] = []  # a heap; tickets of waiters gone ahead stay until popped
        self._asked = 0
        self._moved = clock()  # when a turn was last taken or given back
        self._lock = threading.Lock()
        self._held = threading.local()

    def holds(self) -> bool:
        """Whether this thread holds a turn."""
        return getattr(self._held, "turn", False)

    def others_hold(self) -> bool:
        """Whether a thread other than this one holds a turn: another run computing beside this one's (a turn handed
        from one thread to the next is never free between them)."""
        with self._lock:
            return self.size - self.free - (1 if self.holds() else 0) > 0

    def quiet(self) -> bool:
        """Whether no run holds a turn or waits for one: nothing of the app's computes."""
        with self._lock:
            return self.free == self.size and not self._waiters()

    def waiting(self) -> int:
        """How many threads wait for a turn."""
        with self._lock:
            return self._waiters()

    def _waiters(self) -> int:
        """The threads waiting for a turn (the caller holds the lock): tickets of those gone ahead left out."""
        return sum(not t.gone for t in self._waiting)

    def _take(self, rank: float) -> bool:
        """A turn for this thread (True), or False where the holders have stalled (it goes ahead without)."""
        with self._lock:
            if self.free > 0:
                self.free -= 1
                self._moved = self._clock()
                self._held.turn = True
                return True
            self._asked += 1
            ticket = _Ticket((rank, self._asked))
            heapq.heappush(self._waiting, ticket)
        while True:
            with self._lock:
                stalled_for = self._clock() - self._moved
                if ticket.event.is_set():
                    self._held.turn = True
                    return True
                if stalled_for >= self.stall_s:
                    ticket.gone = True
                    return False
            ticket.event.wait(self.stall_s - stalled_for)

    def _give_back(self) -> None:
        self._held.turn = False
        with self._lock:
            self._moved = self._clock()
            while self._waiting:
                ticket = heapq.heappop(self._waiting)
                if not ticket.gone:
                    ticket.event.set()
                    return
            self.free += 1

    @contextmanager
    def turn(self, rank: float = 0.0) -> Iterator[bool]:
        """Hold a turn for the block (yields whether one was taken; a thread that holds one already keeps it).
        `rank`: lower goes first (the app passes when the session began: a student's next step before a
        newcomer's first)."""
        if self.holds():
            yield True
            return
        try:
            yield self._take(rank)
        finally:
            if self.holds():  # not where it went ahead without a turn, nor where `away` could not take it again
                self._give_back()

    @contextmanager
    def away(self) -> Iterator[None]:
        """This thread's turn given back for the block (a wait for other work), taken again after it, first
        among the waiters."""
        if not self.holds():
            yield
            return
        self._give_back()
        try:
            yield
        finally:
            self._take(float("-inf"))


TURNS = Turns(RUNS_AT_ONCE, STALL_S)  # the process's


def turn(rank: float = 0.0):
    """A turn of the process's for the block (`Turns.turn`)."""
    return TURNS.turn(rank)


def away():
    """This thread's turn of the process's given back for the block (`Turns.away`)."""
    return TURNS.away()


def others_compute() -> bool:
    """Whether another run of this process holds a turn (`Turns.others_hold`)."""
    return TURNS.others_hold()


def quiet() -> bool:
    """Whether no run of this process holds or waits for a turn (`Turns.quiet`)."""
    return TURNS.quiet()
