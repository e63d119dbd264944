"""The page *Heads behind a prediction*'s own controls: the inputs that shape its view, each under its session key,
which links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them). Its pair
and circuit are the link's own parameters (corrupted, answer, wrong, circuit, k); these are its *Task*'s choices
(`ui/pages/prediction/task_section`): one pair or a set, the set's source, size and seed, the method and a
circuit's edges drawn."""

from __future__ import annotations

from mha_viz.export import view_params as vp

PRED_TASK = "pred_task"  # one pair or a task
TASK_SOURCE = "task_source"  # a generator, or a file
TASK_SIZE = "task_size"
TASK_SEED = "task_seed"
TASK_METHOD = "task_method"
TASK_K = "task_k"  # the edges drawn of a task's circuit (ui/pages/prediction/task_edges)

TASKS = ("one pair", "a task")
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
    vp.choice(PRED_TASK, TASKS, default=TASKS[0]),
    vp.choice(TASK_SOURCE, tuple(SOURCES), default=next(iter(SOURCES))),
    vp.number(TASK_SIZE, 2, MAX_PAIRS, default=DEFAULTS[TASK_SIZE]),
    vp.number(TASK_SEED, 0, 2**31 - 1, default=0),
    vp.choice(TASK_METHOD, tuple(METHODS), default=next(iter(METHODS))),
    vp.number(TASK_K, 1, MAX_DRAWN, default=DEFAULT_DRAWN),
)
