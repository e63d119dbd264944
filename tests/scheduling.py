"""How `make test` hands the tests to its processes (pytest-xdist, `--dist loadgroup`): a file's tests together,
every browser test in one process, the longest groups first (`group`, `hand_out`).

A file's tests together: xdist's loadgroup reads a test's group from its node id, which its worker extends with
the `xdist_group` marker by setting `item._nodeid`; pytest 9 builds the id from elsewhere, so the extension was
lost and every test was a group of its own (one file's tests, and its module and session fixtures, on both
processes; two browser servers writing one log). Here a group is read from the id itself: `group`, or the group
after an '@' where xdist's extension works.

Every browser test in one process: the browser tests wait on round trips to the browser and the app, and a
round trip waits longer the more that runs beside it. With a group a browser file, the three processes each ran
browser files at the start of the suite, each with its own server and browser: a file took 4 to 14 times as
long as alone (test_e2e_lines 90 s against 6 s; test_e2e_lesson 184 s against 24 s), and the browser tier
1,722 s of the processes' time, against 658 s in one process (the whole suite back to back, 1,358 s against
1,000 s, on 2 cores: stop 88).

The longest first: xdist orders the groups by their number of tests, which puts the browser tests (a few tests of
a minute or more each) after hundreds of unit files, and the run ends with one process working through them
while the other is idle. Here the groups go out tier by tier, tests/e2e first, then tests/app, tests/models and
tests/unit; within a tier in xdist's order."""

from __future__ import annotations

import os
import resource
import time

from xdist.scheduler import LoadGroupScheduling

# tiers by how long a group of theirs takes, longest first (tests/helpers.py's TIERS)
FIRST = ("e2e", "app", "models", "unit")
BROWSER = "tests/e2e"  # the browser tier's one group


def group(nodeid: str) -> str:
    """The group of the test `nodeid` (tests/conftest.py's `_group`): its file, but every browser test's is
    BROWSER (the module's docstring)."""
    path = nodeid.split("::", 1)[0]
    return BROWSER if path.startswith(BROWSER + "/") else path


def _rank(scope: str) -> int:
    """Where the group `scope` (as `group` names it) goes out: its tier's place in FIRST."""
    parts = scope.split("/")
    return FIRST.index(parts[1]) if len(parts) >= 2 and parts[0] == "tests" and parts[1] in FIRST else len(FIRST)


def hand_out(scopes) -> list[str]:
    """The groups `scopes` in the order they go out: tier by tier as FIRST says, ties in their own order."""
    return sorted(scopes, key=_rank)


class LongestFirst(LoadGroupScheduling):
    """`--dist loadgroup` grouping by `group` and handing the groups out in `hand_out`'s order (the module's
    docstring)."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist's own extension, where it works
            return super()._split_scope(nodeid)
        return group(nodeid)  # `_group`

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the first hand-out: xdist's schedule() has just filled the queue
            for scope in reversed(hand_out(self.workqueue)):
                self.workqueue.move_to_end(scope, last=False)
            self._ordered = True
        super()._assign_work_unit(node)


def timeline(nodeid: str, event: str) -> None:
    """With MHA_VIZ_TEST_TIMELINE=FILE, a line "worker<TAB>seconds since the epoch<TAB>start|end<TAB>test id
    <TAB>CPU seconds of this process<TAB>CPU seconds of its ended children" appended to FILE.<worker> (each
    process its own file): which tests ran beside which, when, and what each cost the cores (a child's time
    counts once it has ended and been waited for: a server, a Ray cluster, a subprocess)."""
    path = os.environ.get("MHA_VIZ_TEST_TIMELINE")
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        with open(f"{path}.{worker}", "a") as f:
            f.write(f"{worker}\t{time.time():.3f}\t{event}\t{nodeid}\t{own.ru_utime + own.ru_stime:.2f}"
                    f"\t{children.ru_utime + children.ru_stime:.2f}\n")
