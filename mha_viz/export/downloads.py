"""A run's downloads, planned (`budget.plan.Plan`): the run's `.npz` (`run_file.to_bytes`), a long run's scan file
(`Scan.save`) and the HTML report (`report.report_bytes`). Each is made when the user clicks, from the run shown; its
plan says beforehand what it holds (so that the sidebar can say a file is too large for this server before the click,
and the click is admitted on the same bytes) and reads nothing again: the run is made already, no model runs (n is
the run's tokens).
"""

from __future__ import annotations

import io
from typing import Callable

import pandas as pd

from mha_viz.budget import memory
from mha_viz.budget.plan import Plan
from mha_viz.capture import run_file
from mha_viz.export import report


def npz_bytes(run, *, float16: bool = False) -> int:
    """What the dense run's `.npz` holds while it is made: its arrays (a float16 copy of the attention when asked),
    their compressed file and its copy handed out (each at most as large as the arrays)."""
    size = sum(int(a.nbytes) for a in (run.head_outputs, run.value_norms) if a is not None)
    size += run.attentions.nbytes // 2 if float16 else run.attentions.nbytes
    return 3 * size


def plan_npz(run, *, float16: bool = False) -> Plan[bytes]:
    """The dense run's `.npz` (`AttentionRun.save`: every head's attention, float16 when asked)."""
    return Plan(run.n, memory.Need(host=npz_bytes(run, float16=float16)),
                lambda: run_file.to_bytes(run, float16=float16))


def plan_scan_file(run) -> Plan[bytes]:
    """A long run's `.npz`: its scan (`Scan.save`), whose arrays it holds twice (the file's copy handed out)."""
    scan = run.summary
    held = 2 * sum(int(a.nbytes) for a in (scan.pooled, scan.keys, scan.weights, scan.rest_mass))
    return Plan(run.n, memory.Need(host=held), lambda: scan.save(io.BytesIO()).getvalue())


def report_need(run, heads: int) -> int:
    """What the HTML report of `heads` heads holds. A dense run's: the head table's work on one layer's
    probabilities at a time (about 4 copies of it), and each chosen head's heatmap as numbers and as text (about
    16 bytes a weight). A long run's reads its scan's thumbnails and table: each chosen head is recomputed whole
    (float32) and pooled (a float64 copy), one at a time, then drawn as at most POOL_ABOVE² numbers."""
    if run.is_dense:
        layer = run.attentions.nbytes // max(run.num_layers, 1)
        return int(4 * layer + 16 * heads * run.n * run.n)
    side = min(run.n, report.POOL_ABOVE)
    return int(12 * run.n * run.n + 16 * heads * side * side)


def plan_report(run, heads: list[tuple[int, int]], *, table: Callable[[], pd.DataFrame | None],
                facts: Callable[[], dict]) -> Plan[bytes]:
    """The HTML report of `run` with the chosen `heads`, its head table (`table()`: None leaves it out) and the
    model's facts (`facts()`), both made on the click."""
    return Plan(run.n, memory.Need(host=report_need(run, len(heads))),
                lambda: report.report_bytes(run, heads=heads, table=table(), facts=facts()))
