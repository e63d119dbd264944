"""The page *Heads behind a prediction*'s own controls: the inputs that shape its view, each under its session key,
which links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them). Its pair
and circuit are the link's own parameters (corrupted, answer, wrong, circuit, k); these are its *Task*'s choices
(`prediction/task/page.py`): one pair or a set, the set's source, size and seed, the method and a
circuit's edges drawn."""

from __future__ import annotations

from mha_viz.export import view_params as vp

PRED_TASK = "pred_task"  # one pair or a task
TASK_SOURCE = "task_source"  # a generator, or a file
TASK_SIZE = "task_size"
TASK_SEED = "task_seed"
TASK_METHOD = "task_method"
TASK_K = "task_k"  # the edges drawn of a task's circuit (prediction/task/page.py)

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

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why),
# and its other keys that the kit's keys held
PRED_PRESET = "pred_preset"  # a preset pair: sets the sidebar's text (clean) and the corrupted text
PRED_CORRUPTED = "pred_corrupted"
PRED_ANSWER = "pred_answer"  # token texts; empty: each run's prediction
PRED_WRONG = "pred_wrong"
PRED_POS_LAYER = "pred_pos_layer"  # the layer of the head × position estimate grid
CIRC_METHOD = "circ_method"  # "EAP" or "EAP-IG"
CIRC_K = "circ_k"  # edges drawn
CIRC_FILE = "circ_file"  # a saved circuit (JSON) to open
TASK_FILE = "task_file"

CONTROLS = (
    vp.choice(PRED_TASK, TASKS, default=TASKS[0]),
    vp.choice(TASK_SOURCE, tuple(SOURCES), default=next(iter(SOURCES))),
    vp.number(TASK_SIZE, 2, MAX_PAIRS, default=DEFAULTS[TASK_SIZE]),
    vp.number(TASK_SEED, 0, 2**31 - 1, default=0),
    vp.choice(TASK_METHOD, tuple(METHODS), default=next(iter(METHODS))),
    vp.number(TASK_K, 1, MAX_DRAWN, default=DEFAULT_DRAWN),
    *vp.local("the link's own parameters: the pair and its circuit (corrupted, answer, wrong, circuit, k)",
              PRED_CORRUPTED, PRED_ANSWER, PRED_WRONG, CIRC_METHOD, CIRC_K),
    *vp.local("a preset acts once: it sets the sidebar's text and the corrupted text", PRED_PRESET),
    *vp.local("the layer of the estimate by position follows the chosen head", PRED_POS_LAYER),
    *vp.local("uploads: a saved circuit, a task's pairs", CIRC_FILE, TASK_FILE),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
TASK_GO = "task_go"
TASK_CANCEL = "task_cancel"
TASK_RUNNING = "_task_running"  # what the running job is for (jobs.run)
TASK_RESULT = "_task_result"  # (TaskKey, the result over the set)
TASK_GRID = "task_grid"
DL_TASK = "dl_task"
TASK_GRAPH = "task_graph"
TASK_EDGES_DF = "task_edges"
TASK_FAITH = "_task_faith"  # (task key, its faithfulness over the pairs) of the last run
TASK_FAITH_GO = "task_faith_go"
TASK_FAITH_CANCEL = "task_faith_cancel"
TASK_FAITH_RUNNING = "_task_faith_running"
PRED_UNDO = "_pred_undo"  # preset_undo.Held: the texts a preset replaced, while the boxes still hold the preset's
PRED_UNDO_GO = "pred_undo_go"  # the button that puts them back
PRED_GO = "pred_go"
PRED_CANCEL = "pred_cancel"
PRED_RESULT = "_pred_result"  # (PredKey, prediction.Explanation) of the last result
PRED_RUNNING = "_pred_running"  # set while the estimate runs: still here on the next run when it was cancelled
PRED_EXTRA = "_pred_extra"  # {(PredKey, layer, head, what): result} of the one-head panel
PRED_LAYER = "pred_layer"  # the head opened in the one-head panel
PRED_HEAD = "pred_head"
PRED_DLA_GRID = "pred_dla_grid"  # the grids' selection events
PRED_RESTORED_GRID = "pred_restored_grid"
PRED_ESTIMATE_GRID = "pred_estimate_grid"
PRED_REAL_GO = "pred_real_go"  # real patching, after the estimate
PRED_REAL_CANCEL = "pred_real_cancel"
PRED_REAL_RUNNING = "_pred_real_running"  # set while real patching runs (as PRED_RUNNING)
PRED_POS_FOLLOWS = "_pred_pos_follows"  # the chosen head's row PRED_POS_LAYER was last set to (it follows the head)
DL_PRED = "dl_pred"
DL_PRED_POSITIONS = "dl_pred_positions"
PRED_CLEAN_HEAD = "pred_clean_head"
PRED_CORRUPTED_HEAD = "pred_corrupted_head"
PRED_POSITIONS = "pred_positions"
PRED_POSITION_GRID = "pred_position_grid"
PRED_SCATTER = "pred_scatter"
PRED_TOKENS = "pred_tokens"
PRED_WEIGHTED_HEAD = "pred_weighted_head"
CIRC_GO = "circ_go"
CIRC_CANCEL = "circ_cancel"
CIRC_RUNNING = "_circ_running"  # set while the edges are estimated (jobs.run)
CIRC_RESULTS = "_circ_results"  # {(PredKey, method): Edges} of the pair on screen
CIRC_GRAPH = "circ_graph"  # the graph's selection events
CIRC_PICKED = "_circ_picked"  # (PredKey, method, sender, receiver): the edge clicked last
CIRC_REAL = "_circ_real"  # {(PredKey, ...): a value run for real}: edges clicked, the chosen k, the top 20
CIRC_TOP_GO = "circ_top_go"  # patch the top 20 edges for real
CIRC_REAL_CANCEL = "circ_real_cancel"  # Cancel while something runs for real
CIRC_REAL_RUNNING = "_circ_real_running"  # set while it runs (jobs.run)
CIRC_STOPPED = "_circ_stopped"  # {(PredKey, what)} cancelled: run again only when asked
CIRC_AGAIN_K = "circ_again_k"  # run a cancelled one again
CIRC_AGAIN_EDGE = "circ_again_edge"
CIRC_OPENED = "_circ_opened"  # the file id of the saved circuit opened last (opened once)
CIRC_PENDING = "_circ_pending"  # a saved circuit waiting for its pair to be on the page
CIRC_OPEN_PAIR = "circ_open_pair"  # the button that puts a saved circuit's pair on the page
DL_CIRC_CSV = "dl_circ_csv"
DL_CIRC_JSON = "dl_circ_json"
PRED_AUTO = "_pred_auto"  # a link asked for a circuit: the heads, then the circuit, are found once on opening
CIRC_AUTO = "_circ_auto"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn; the layer by position,
# which follows the chosen head; the uploads (a saved circuit, a task's pairs)
NOT_KEPT = frozenset({PRED_POS_LAYER, CIRC_FILE, TASK_FILE, PRED_LAYER, PRED_HEAD})
