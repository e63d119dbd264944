"""The app's preload compiles every variant of the compiled loops that a page then calls (`preload.compile_loops`): a
run the app holds is read-only (shared by the sessions), which Numba compiles apart from a writable array. Before,
the first Head metrics of a new version compiled the head table's loop for it: 3.5–5 s. Checked in a fresh
interpreter, whose loops are loaded from Numba's cache only as each variant is first called: after the preload, the
head table and a head pooled onto its grid, of a read-only run, add no variant."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = """
import json, sys
import numpy as np
from mha_viz import AttentionRun
from mha_viz.capture import pool_kernel
from mha_viz.metrics import head_table, row_loop
from mha_viz.metrics.row_table import TABLE
from mha_viz.ui.shell import preload
from mha_viz.views import detail

def variants():
    return {"rows": len(row_loop.loop(TABLE).signatures), "pool": len(pool_kernel._pool_columns.signatures)}

preload.compile_loops()
after_preload = variants()
a = np.random.default_rng(0).random((2, 3, 12, 12), dtype=np.float32)
a /= a.sum(-1, keepdims=True)
a.setflags(write=False)  # as the app holds a run
run = AttentionRun.from_array(a, [f"t{i}" for i in range(12)])
assert not run.attentions.flags.writeable
head_table(run)
run.pooled_head(1, 2, detail.block_edges(12, 5))
rows = a[1, 2].copy()
rows.setflags(write=False)  # rows a reader may hand over as they are held
pool_kernel.pool_rows(rows, 0, detail.block_edges(12, 5), np.zeros((5, 5), np.float32), np.zeros((5, 5)))
json.dump({"preload": after_preload, "pages": variants()}, sys.stdout)
"""


def test_after_the_preload_a_read_only_run_compiles_nothing():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         check=True)
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["preload"]["rows"] >= 2 and counts["preload"]["pool"] >= 2  # both variants of each
    assert counts["pages"] == counts["preload"], counts
