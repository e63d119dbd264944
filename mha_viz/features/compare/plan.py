"""*Compare two texts* planned (`mha_viz.budget.plan`): the comparison of two runs already made, its need from their
sizes, admitted before it runs (`admission.Admission.hold`)."""

from __future__ import annotations

import numpy as np

from mha_viz.budget.memory import Need
from mha_viz.budget.plan import Plan
from mha_viz.capture import head_rows
from mha_viz.views.comparison import Comparison, compare

COMPARE_BLOCK_BYTES = 4 * 8 * 2**22  # float64 temporaries of one block of rows (views.comparison.CHUNK_ENTRIES)


def comparison(run_a, run_b) -> Need:
    """`mha_viz.compare` of two runs already made, from their sizes: on the same tokens, each layer's rows
    of both a block at a time; otherwise every head of a layer of each run at word level (H · words²
    float64 each) and, for runs that hold special tokens (hidden when the tokenizers place them
    differently), a copy of each without them (every head's array, `head_rows.every_head_bytes`)."""
    if run_a.n == run_b.n and run_a.model_name == run_b.model_name:
        return Need(host=COMPARE_BLOCK_BYTES)
    words = sum(8 * run.num_heads * (int(np.count_nonzero(np.diff(run.word_ids))) + 1) ** 2 for run in (run_a, run_b))
    copies = sum(head_rows.every_head_bytes(run.num_layers, run.num_heads, run.n) for run in (run_a, run_b)
                 if any(run.special_mask))
    return Need(host=int(COMPARE_BLOCK_BYTES + words + copies))


def plan_compare(run_a, run_b) -> Plan[Comparison]:
    """`mha_viz.compare(run_a, run_b)` planned: on run A's tokens, its need `comparison`'s."""
    return Plan(run_a.n, comparison(run_a, run_b), lambda: compare(run_a, run_b))
