"""Server-wide admission of heavy computations: by count (MHA_VIZ_MAX_CONCURRENT) and by the
bytes each declares it needs (`memory.Need`), so that two long analyses are never admitted
together onto a card that holds one.

Each place (the host, each CUDA device) has a budget, read when nothing admitted is running
there (what is free then, the loaded models and cached results aside) and kept while work runs:
what runs at once never declares more than it. One computation larger than a whole budget is
refused at once (`OverBudget`); one that fits alone waits (`Busy`) until enough is given back.
Streamlit runs every session as a thread of one process: one lock guards the counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager

from mha_viz.budget import memory, turns
from mha_viz.settings import size_text
from mha_viz.text.tokenize import InputError


class Busy(Exception):
    """Not admitted now (every slot taken, or the memory held by the others); `Admission.wait`
    returns when some may be free. Its message says why, in the words of a notice; `released`
    is how many computations had finished when it was raised."""

    def __init__(self, message: str, released: int = 0) -> None:
        super().__init__(message)
        self.released = released


class OverBudget(InputError):
    """One computation needs more than a whole budget: it would never be admitted."""


def _place_name(place: str) -> str:
    return "memory" if place == memory.HOST else f"GPU memory ({place})"


class Admission:
    """At most `limit` heavy computations at once across all sessions (0: no limit), declaring
    no more bytes at once than each place's budget.

    `hold(need=...)` admits or raises Busy at once, so that a caller can show a notice and
    `wait()` before trying again (or, with `wait=True`, blocks); `running` says how many are in
    progress, `admitted` how many bytes they declared at each place. `budget(place)` reads the
    bytes that may be shared at a place (default `memory.budget`; tests plant a simulated one).
    """

    def __init__(self, limit: int, *, budget: Callable[[str], int] = memory.budget) -> None:
        self.limit = limit
        self.running = 0
        self.admitted: dict[str, int] = {}
        self.released = 0  # computations finished so far: what a Busy waits to see change
        self._read = budget
        self._budgets: dict[str, int] = {}
        self._cond = threading.Condition()

    def budget(self, place: str) -> int:
        """Bytes that computations running at once may share at `place` (HOST or "cuda:0")."""
        with self._cond:
            return self._budget(place)

    def room(self, device) -> memory.Room:
        """`memory.room` of `device` with this admission's budgets: what one computation may
        ever take there, whatever else runs now."""
        return memory.room(device, read=self.budget)

    @contextmanager
    def hold(self, *, wait: bool = False, need: memory.Need | None = None):
        """Admission for the duration of the block. `need`: the bytes it declares (None: none).
        Not admitted now: raise Busy at once, or with `wait` block until it is (work that has no
        page to show a notice on). More than a whole budget: raise OverBudget, waiting or not."""
        places = {p: b for p, b in (need.places() if need else {}).items() if b > 0}
        with self._cond:
            admitted = self._fits(places)
            if admitted:
                self._admit(places)
            elif not wait:
                raise Busy(self._why(places), self.released)
        if not admitted:
            with turns.away():  # the run's turn meanwhile goes to another session's
                with self._cond:
                    while not self._fits(places):
                        self._cond.wait()
                    self._admit(places)
        try:
            yield
        finally:
            with self._cond:
                self.running -= 1
                self.released += 1
                for place, nbytes in places.items():
                    self.admitted[place] -= nbytes
                self._cond.notify_all()

    def _admit(self, places: dict[str, int]) -> None:
        self.running += 1
        for place, nbytes in places.items():
            self.admitted[place] = self.admitted.get(place, 0) + nbytes

    def wait(self, timeout: float = 1.0, *, busy: Busy | None = None) -> None:
        """Block until a slot is free, or with `busy` (what `hold` raised) until a computation
        has finished since (memory given back), or `timeout` seconds. The run's turn (`turns`)
        goes to another session's meanwhile."""
        with turns.away(), self._cond:
            if busy is None:
                self._cond.wait_for(lambda: not self.limit or self.running < self.limit, timeout=timeout)
            else:
                self._cond.wait_for(lambda: self.released != busy.released, timeout=timeout)

    def _budget(self, place: str) -> int:
        if not self.admitted.get(place) or place not in self._budgets:
            self._budgets[place] = self._read(place)
        return self._budgets[place]

    def _fits(self, places: dict[str, int]) -> bool:
        """Whether `places` may start now; raises OverBudget when it never could."""
        budgets = {p: self._budget(p) for p in places}  # one reading each
        for place, nbytes in places.items():
            whole = budgets[place]
            if nbytes > whole:
                raise OverBudget(
                    f"This analysis needs about {size_text(nbytes)} of {_place_name(place)}, "
                    f"{size_text(nbytes - whole)} more than the {size_text(whole)} this server has for "
                    f"analyses. {memory.OUT_OF_MEMORY_ADVICE}")
        if self.limit and self.running >= self.limit:
            return False
        return all(self.admitted.get(p, 0) + b <= budgets[p] for p, b in places.items())

    def _why(self, places: dict[str, int]) -> str:
        if self.limit and self.running >= self.limit:
            return f"{self.running} analyses are running (at most {self.limit} at once)"
        place = next(p for p, b in places.items() if self.admitted.get(p, 0) + b > self._budget(p))
        return (f"the {self.running} analyses running hold {size_text(self.admitted.get(place, 0))} of the "
                f"{size_text(self._budget(place))} of {_place_name(place)} this server has for analyses, and "
                f"yours needs {size_text(places[place])}")
