"""How an AppTest run waits for its script: on the runner's SHUTDOWN event, not by polling.

Streamlit's `AppTest.run` (1.67, `testing/v1/local_script_runner.require_widgets_deltas`) waits for the script's
thread by waking every millisecond and scanning every event the run has sent so far for a SHUTDOWN. A page that
draws a few hundred elements sends a few hundred events, so the test's thread scans them a thousand times a second
and takes the interpreter's lock from the script it waits for: 6.5 % of the app tier's samples (py-spy, stop 86).
Here the wait blocks on a `threading.Event` that a receiver of the runner's events sets at SHUTDOWN: the app tier
took 183.6 s against 200.0 s, and 204.8 s against 232.0 s, back to back on 2 cores (stop 86). What it waits for,
its timeout and its error are Streamlit's; where Streamlit has no such function any more, nothing is replaced."""

from __future__ import annotations

import threading

from streamlit.runtime.scriptrunner import ScriptRunnerEvent
from streamlit.testing.v1 import local_script_runner


def until_shutdown(runner, timeout: float = 3) -> None:
    """Return once `runner` (a LocalScriptRunner just started) has sent SHUTDOWN; after `timeout` seconds, stop it
    and raise Streamlit's RuntimeError."""
    done = threading.Event()

    def seen(sender, event, **_data) -> None:
        if event == ScriptRunnerEvent.SHUTDOWN:
            done.set()

    runner.on_event.connect(seen, weak=False)
    try:
        if runner.script_stopped() or done.wait(timeout):  # script_stopped: a SHUTDOWN sent before `seen` listened
            return
    finally:
        runner.on_event.disconnect(seen)
    runner.request_stop()
    runner.join()
    raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


def install() -> bool:
    """Make AppTest wait with `until_shutdown`; False where this Streamlit has no polling wait to replace."""
    if not hasattr(local_script_runner, "require_widgets_deltas"):
        return False
    local_script_runner.require_widgets_deltas = until_shutdown
    return True
