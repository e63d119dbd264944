"""Each run of the script, timed, for the page benchmark (benchmarks/pages.py) and the test that
counts a page switch's runs (issue 59): with `MHA_VIZ_RUN_TRACE` naming a file, every run of
`main` appends one line to it, `start end session page how` (times in seconds since the epoch,
`how`: `done`, or the exception that ended the run, e.g. RerunException for st.rerun or
st.switch_page). Off (the variable unset, as always outside the benchmark), a run pays one
environment lookup."""

from __future__ import annotations

import functools
import os
import sys
import time

ENV = "MHA_VIZ_RUN_TRACE"


def _where() -> tuple[str, str]:
    """(session id, page url path) of the running script: `default` for the default page (its path
    is empty), '-' where unknown."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        manager = ctx.pages_manager
        page = manager.get_pages().get(manager.current_page_script_hash, {}).get("url_pathname", "-")
        return (ctx.session_id or "-").replace(" ", "_"), page or "default"
    except Exception:  # noqa: BLE001 - the trace never fails a run
        return "-", "-"


def traced(run):
    """`run` (the script's main), writing its start and end to the trace file when one is named."""

    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        path = os.environ.get(ENV)
        if not path:
            return run(*args, **kwargs)
        start = time.time()
        try:
            return run(*args, **kwargs)
        finally:
            end, exc = time.time(), sys.exc_info()[0]
            session, page = _where()
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"{start:.6f} {end:.6f} {session} {page} {exc.__name__ if exc else 'done'}\n")

    return wrapper


def read_trace(path) -> list[dict]:
    """The runs a trace file holds: [{start, end, session, page, how}] in the order they ended."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    runs = []
    for line in lines:
        parts = line.split()
        if len(parts) == 5:
            runs.append({"start": float(parts[0]), "end": float(parts[1]), "session": parts[2], "page": parts[3],
                         "how": parts[4]})
    return runs
