"""The choices of *Heads behind a prediction* over a task (`task_section`), apart from its drawing: what
`page_controls` declares for links and lessons, without importing the section."""

from __future__ import annotations

from mha_viz.ui import keys

TASKS = ("one pair", "a task")
SOURCES = {"IOI (names and places)": "ioi", "greater-than (years)": "greater_than",
           "induction (random words)": "induction", "a file (CSV or JSONL)": "file"}
METHODS = {"attribution patching (the estimate)": "estimate", "activation patching (every head, for real)": "patch",
           "direct logit attribution": "dla", "edge attribution (EAP)": "eap",
           "edge attribution (EAP-IG, 5 steps)": "eap-ig"}
EDGE_METHODS = ("eap", "eap-ig")  # a circuit: its edges, then its faithfulness (`task_edges`)
IG_STEPS = 5
MAX_DRAWN, DEFAULT_DRAWN = 200, 30  # a task circuit's edges drawn: at most, and at first
MAX_PAIRS = 500
DEFAULTS = {keys.TASK_SIZE: 20, keys.TASK_SEED: 0}  # a set of 20 pairs: a first result in seconds on SmolLM2
