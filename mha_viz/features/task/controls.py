"""The page *Heads behind a task*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them): the set's
source, size and seed, the method and a circuit's edges drawn; and its other session keys."""

from __future__ import annotations

from mha_viz.export import view_params as vp

TASK_SOURCE = "task_source"  # a generator, or a file
TASK_SIZE = "task_size"
TASK_SEED = "task_seed"
TASK_METHOD = "task_method"
TASK_K = "task_k"  # the edges drawn of a task's circuit
TASK_FILE = "task_file"

SOURCES = {"IOI (names and places)": "ioi", "greater-than (years)": "greater_than",
           "induction (random words)": "induction", "docstring (Python parameters)": "docstring",
           "a file (CSV or JSONL)": "file"}
METHODS = {"attribution patching (the estimate)": "estimate", "activation patching (every head, for real)": "patch",
           "direct logit attribution": "dla", "edge attribution (EAP)": "eap",
           "edge attribution (EAP-IG, 5 steps)": "eap-ig"}
ABOUT = {  # what each generator's pairs are, for the page (docs/attribution.md, section 8, has the templates)
    "ioi": "Indirect objects: “When Mary and John went to the store, John gave a drink to” → “ Mary” over “ John”; "
           "the corrupted prompt names a third person the second time.",
    "greater_than": "Years: “The war lasted from the year 1732 to the year 17” → “33” over “31”; the corrupted "
                    "prompt starts in 1701. For a tokenizer that writes digits one by one (Llama's, SmolLM2's), "
                    "the next decade's digit: “4” over “2”.",
    "induction": "Eight random words, then the first few again: the next word is the one that followed the first "
                 "time; the corrupted prompt repeats other words.",
    "docstring": "A Python function of four parameters whose docstring documents the first two and opens “:param” "
                 "for the third: its name over the fourth's; the corrupted prompt's signature names four others.",
}
EDGE_METHODS = ("eap", "eap-ig")  # a circuit: its edges, then its faithfulness
IG_STEPS = 5
MAX_PAIRS = 500
MAX_DRAWN, DEFAULT_DRAWN = 200, 30  # a task circuit's edges drawn: at most, and at first
DEFAULTS = {TASK_SIZE: 20, TASK_SEED: 0}  # a set of 20 pairs: a first result in seconds on SmolLM2

CONTROLS = (
    vp.choice(TASK_SOURCE, tuple(SOURCES), default=next(iter(SOURCES))),
    vp.number(TASK_SIZE, 2, MAX_PAIRS, default=DEFAULTS[TASK_SIZE]),
    vp.number(TASK_SEED, 0, 2**31 - 1, default=0),
    vp.choice(TASK_METHOD, tuple(METHODS), default=next(iter(METHODS))),
    vp.number(TASK_K, 1, MAX_DRAWN, default=DEFAULT_DRAWN),
    *vp.local("an upload: a task's pairs (the notebook names the file)", TASK_FILE),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
TASK_GO = "task_go"
TASK_CANCEL = "task_cancel"
TASK_RUNNING = "_task_running"  # what the running job is for (jobs.run)
TASK_RESULT = "_task_result"  # (TaskKey, the result over the set)
TASK_CHECKED = "_task_checked"  # (TaskKey, its plan or None, why it cannot run or None): planned once a key
TASK_GRID = "task_grid"
DL_TASK = "dl_task"
TASK_GRAPH = "task_graph"
TASK_EDGES_DF = "task_edges"
TASK_FAITH = "_task_faith"  # (task key, its faithfulness over the pairs) of the last run
TASK_FAITH_GO = "task_faith_go"
TASK_FAITH_CANCEL = "task_faith_cancel"
TASK_FAITH_RUNNING = "_task_faith_running"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the upload of a task's pairs
NOT_KEPT = frozenset({TASK_FILE})
