"""Rules of the suite itself, read from the test sources with `ast`: no test orders threads or waits
by sleeping. The one `time.sleep` allowed in tests/ is between the polls of `tests/waiting.wait_until`
(a poll with a deadline); anything else waits on an event, a barrier or a condition, or polls through it."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ALLOWED = {("waiting.py", "wait_until")}  # (file under tests/, function) that may sleep between polls


def sleeps(source: str, name: str) -> list[str]:
    """Each sleep in `source` (a file `name` under tests/) outside ALLOWED: `time.sleep(...)`,
    `sleep(...)` imported from time, or a `time.sleep` passed on as a value; 'name:line' each."""
    tree = ast.parse(source)
    imported = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "time" for a in node.names if a.name == "sleep"}
    time_names = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                  for a in node.names if a.name == "time"}
    allowed_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (name, node.name) in ALLOWED:
            allowed_lines |= set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    found = []
    for node in ast.walk(tree):
        is_sleep = (isinstance(node, ast.Attribute) and node.attr == "sleep" and isinstance(node.value, ast.Name)
                    and node.value.id in time_names) or (isinstance(node, ast.Name) and node.id in imported)
        if is_sleep and node.lineno not in allowed_lines:
            found.append(f"{name}:{node.lineno}")
    return found


def test_no_test_sleeps_outside_the_polling_helper():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if "artifacts" in path.parts:
            continue
        found += sleeps(path.read_text(), path.relative_to(TESTS).as_posix())
    assert not found, ("time.sleep in tests (wait on an event or barrier, or poll with "
                       f"tests.waiting.wait_until): {found}")


def test_a_planted_sleep_is_found():
    planted = ("import threading\nimport time\n\n"
               "def test_race():\n    t = threading.Thread(target=print)\n    t.start()\n"
               "    time.sleep(0.2)  # the thread has probably started by now\n")
    assert sleeps(planted, "unit/test_race.py") == ["unit/test_race.py:7"]
    assert sleeps("from time import sleep as nap\n\nnap(1)\n", "x.py") == ["x.py:3"]
    assert sleeps("import time as t\n\nwait = t.sleep\n", "x.py") == ["x.py:3"]
    # the same sleep inside the polling helper is allowed, and only there
    helper = "import time\n\ndef wait_until(p, s):\n    time.sleep(s)\n"
    assert sleeps(helper, "waiting.py") == [] and sleeps(helper, "unit/waiting.py") == ["unit/waiting.py:4"]
    assert sleeps("import time\n\ntime.monotonic()\n", "x.py") == []
