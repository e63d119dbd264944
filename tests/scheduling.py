"""How `make test` hands the tests to its processes (pytest-xdist, `--dist loadgroup`): a file's tests together
(tests/conftest.py's `_group`), the longest groups first.

A file's tests together: xdist's loadgroup reads a test's group from its node id, which its worker extends with
the `xdist_group` marker by setting `item._nodeid`; pytest 9 builds the id from elsewhere, so the extension was
lost and every test was a group of its own (one file's tests, and its module and session fixtures, on both
processes; two browser servers writing one log). Here a group is read from the id itself: the file, as
`_group` says, or the group after an '@' where xdist's extension works.

The longest first: xdist orders the groups by their number of tests, which puts a browser file (a few tests of
a minute or more each) after hundreds of unit files, and the run ends with one process working through them
while the other is idle. Here the groups go out tier by tier, tests/e2e first, then tests/app, tests/models and
tests/unit; within a tier in xdist's order."""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

# tiers by how long a group of theirs takes, longest first (tests/helpers.py's TIERS)
FIRST = ("e2e", "app", "models", "unit")


def _rank(scope: str) -> int:
    """Where the group `scope` (a test file's path, as `_group` names it) goes out: its tier's place in FIRST."""
    parts = scope.split("/")
    return FIRST.index(parts[1]) if len(parts) > 2 and parts[0] == "tests" and parts[1] in FIRST else len(FIRST)


class LongestFirst(LoadGroupScheduling):
    """`--dist loadgroup` grouping by file and handing out the browser tier's groups first (the module's
    docstring)."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist's own extension, where it works
            return super()._split_scope(nodeid)
        return nodeid.split("::", 1)[0]  # `_group`: the file

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the first hand-out: xdist's schedule() has just filled the queue
            for scope in sorted(self.workqueue, key=_rank, reverse=True):  # a stable sort: ties keep xdist's order
                self.workqueue.move_to_end(scope, last=False)
            self._ordered = True
        super()._assign_work_unit(node)
