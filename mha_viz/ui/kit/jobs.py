"""A page's cancellable job (the corpus statistics, a prediction's estimate and patching, a
generation): the button that starts it beside a Cancel (or Stop) button that is live only while it
runs, a progress bar, and on the next run a notice when it was cancelled.

Pressing any widget while the script runs stops the run (Streamlit raises inside it at its next
update), so Cancel is a plain button: what the job was for stays in the session under its
`running` key until the job ends, and on the next run `cancelled` finds it there. The page's inputs
are widgets kept across runs (persist_state), so a cancelled job loses none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable

import streamlit as st

from mha_viz.progress import Progress, with_time_left
from mha_viz.ui.kit import resources, session
from mha_viz.ui.kit.text import plain


def live_button(slot, label: str, key: str, *, live: bool, help: str):
    """A button pressable only while something runs (pressing any widget interrupts the run):
    greyed out and keyless otherwise, so that it can replace the live one in the same run."""
    return slot.button(label, key=key if live else None, disabled=not live, help=help)


@dataclass
class Buttons:
    """The start button's press, and where both buttons are drawn."""

    pressed: bool
    box: Any  # both buttons: `done()` empties it
    stop: Any  # the Cancel button's slot
    label: str
    key: str
    help: str
    start: str = ""  # the start button's label
    ran: str | None = None  # what `done()` says in the buttons' place (None: they go)
    widths: tuple = (2, 1, 3)

    def live(self) -> None:
        """Cancel made live for a job that starts without its button (a link asked for it)."""
        live_button(self.stop, self.label, self.key, live=True, help=self.help)

    def idle(self) -> None:
        """Cancel greyed out: the job ended without a result (its message is below)."""
        live_button(self.stop, self.label, self.key, live=False, help=self.help)

    def done(self) -> None:
        """The job has its result: both buttons go, or (`ran`) the start button stays, greyed out, with why."""
        if self.ran is None:
            self.box.empty()
        else:
            finished(self.box.container(), self.start, self.ran, self.widths)


def finished(where, label: str, why: str, widths=(2, 1, 3)) -> None:
    """The start button greyed out (keyless) and `why` beside it: the result below is for the inputs above, so
    that a page holding its result still shows where a new one starts (its buttons vanished, and a class asked
    where Run had gone)."""
    cols = where.columns([widths[0], widths[1] + widths[2]], vertical_alignment="center")
    cols[0].button(label, disabled=True, help=why, type="primary")
    cols[1].caption(why)


def buttons(label: str, key: str, *, cancel_key: str, cancel_help: str, cancel_label: str = "Cancel",
            help: str | None = None, primary: bool = True, widths=(2, 1, 3), ran: str | None = None) -> Buttons:
    """The start button (`label`, `key`) and beside it Cancel, live in the run the start was pressed. `ran`: what
    the page says once it holds the result for its inputs, in the buttons' place (`Buttons.done`, `finished`)."""
    box = st.empty()
    cols = box.container().columns(list(widths))
    pressed = cols[0].button(label, key=key, type="primary" if primary else "secondary", help=help)
    stop = cols[1].empty()
    live_button(stop, cancel_label, cancel_key, live=pressed, help=cancel_help)
    return Buttons(pressed, box, stop, cancel_label, cancel_key, cancel_help, label, ran, tuple(widths))


def run(running: str, what_for: Hashable, work: Callable[[Progress], Any], *, first: str, what: str,
        out_of_memory: str, time_left: bool = False):
    """(result, None) of `work(progress)` under a progress bar starting at `first`, run in turn
    (`resources.attempt`), or (None, a message for the user) when it failed. `what_for` (the key
    of the inputs) stays under the session key `running` only when the run is stopped. `time_left`: each
    message also says the time left, from the pace so far (for work whose messages do not say it)."""
    bar = st.progress(0.0, text=plain(first))
    session.put(running, what_for)

    def progress(fraction: float, message: str) -> None:  # each update lets Streamlit stop this run (Cancel)
        bar.progress(min(max(float(fraction), 0.0), 1.0), text=plain(message))
    told = with_time_left(progress) if time_left else progress
    result, error = resources.attempt(lambda: work(told), what=what, out_of_memory=out_of_memory)
    session.pop(running, None)
    bar.empty()
    return result, error


def cancelled(running: str):
    """What the job under `running` was for, when the last run stopped it before its end (once);
    else None."""
    return session.pop(running, None)
