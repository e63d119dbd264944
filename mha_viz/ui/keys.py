"""The names the UI finds things by: every `st.session_state` key, and nothing else.

Only `ui/session.py` reads and writes them. The widgets the user's choices live under keep their
values across page switches (drawn with `persist_state=KEEP`), except those in NOT_KEPT; keys
starting with "_" are the app's own bookkeeping. What a cached result was computed from is a tuple
where it is used (`analysis_key.AnalysisKey`, the pages' own keys of a result).
"""

from __future__ import annotations

from mha_viz.export import shared_controls

# the pages' own controls' keys live with their feature (`mha_viz/features/<id>/controls.py`), named here too
from mha_viz.features.ablation import controls as _ablation
from mha_viz.features.across_layers import controls as _across_layers
from mha_viz.features.compare import controls as _compare
from mha_viz.features.compare_heads import controls as _compare_heads
from mha_viz.features.composition import controls as _composition
from mha_viz.features.corpus import controls as _corpus
from mha_viz.features.examples import controls as _examples
from mha_viz.features.focus import controls as _focus
from mha_viz.features.generate import controls as _generate
from mha_viz.features.head_metrics import controls as _head_metrics
from mha_viz.features.head_view import controls as _head_view
from mha_viz.features.lines import controls as _lines
from mha_viz.features.model_view import controls as _model_view
from mha_viz.features.prediction import controls as _prediction
from mha_viz.features.qk import controls as _qk
from mha_viz.features.retrieval import controls as _retrieval
from mha_viz.features.similarity import controls as _similarity
from mha_viz.features.teaching import controls as _teaching

ABLATE_MODE = _ablation.ABLATE_MODE
ABLATION_OTHER = _ablation.ABLATION_OTHER
IMP_SOURCE = _ablation.IMP_SOURCE
LAYERS_HEAD = _across_layers.LAYERS_HEAD
LAYERS_LAYER = _across_layers.LAYERS_LAYER
LAYERS_METHOD = _across_layers.LAYERS_METHOD
CMP_METRIC = _compare.CMP_METRIC
CMP_RESCALE = _compare.CMP_RESCALE
COMPARE_HEADS = _compare_heads.COMPARE_HEADS
COMPARE_RESCALE = _compare_heads.COMPARE_RESCALE
COMP_ABOVE = _composition.COMP_ABOVE
COMP_KIND = _composition.COMP_KIND
CORPUS_BATCH = _corpus.CORPUS_BATCH
CORPUS_FIRST = _corpus.CORPUS_FIRST
CORPUS_METRIC = _corpus.CORPUS_METRIC
CORPUS_SCATTER_COLOUR = _corpus.CORPUS_SCATTER_COLOUR
CORPUS_SCATTER_X = _corpus.CORPUS_SCATTER_X
CORPUS_SCATTER_Y = _corpus.CORPUS_SCATTER_Y
CORPUS_TOKENS = _corpus.CORPUS_TOKENS
EXAMPLES_RANK = _examples.EXAMPLES_RANK
EXAMPLES_X = _examples.EXAMPLES_X
EXAMPLES_Y = _examples.EXAMPLES_Y
CROSS_FOCUS_RESCALE = _focus.CROSS_FOCUS_RESCALE
CROSS_FOCUS_SIDE = _focus.CROSS_FOCUS_SIDE
CROSS_FOCUS_TOKEN = _focus.CROSS_FOCUS_TOKEN
FOCUS_KEY = _focus.FOCUS_KEY
FOCUS_LEVEL = _focus.FOCUS_LEVEL
FOCUS_RESCALE = _focus.FOCUS_RESCALE
FOCUS_SHOW = _focus.FOCUS_SHOW
FOCUS_SUMMARIES = _focus.FOCUS_SUMMARIES
FOCUS_TOKEN = _focus.FOCUS_TOKEN
GEN_MAX_NEW = _generate.GEN_MAX_NEW
GEN_RESCALE = _generate.GEN_RESCALE
GEN_SEED = _generate.GEN_SEED
GEN_STEP = _generate.GEN_STEP
GEN_TEMPERATURE = _generate.GEN_TEMPERATURE
GEN_TOP_K = _generate.GEN_TOP_K
GEN_TOP_P = _generate.GEN_TOP_P
S2S_STEP = _generate.S2S_STEP
CROSS_METRIC_CHOICE = _head_metrics.CROSS_METRIC_CHOICE
METRIC_CHOICE = _head_metrics.METRIC_CHOICE
SCATTER_COLOUR = _head_metrics.SCATTER_COLOUR
SCATTER_X = _head_metrics.SCATTER_X
SCATTER_Y = _head_metrics.SCATTER_Y
HEAD_RESCALE = _head_view.HEAD_RESCALE
HEAD_WINDOW = _head_view.HEAD_WINDOW
LINKS_SKIP_FIRST = _head_view.LINKS_SKIP_FIRST
LINKS_STRIP = _head_view.LINKS_STRIP
SUBSET_KEYS = _head_view.SUBSET_KEYS
SUBSET_KEY_LIST = _head_view.SUBSET_KEY_LIST
SUBSET_PICK = _head_view.SUBSET_PICK
SUBSET_QUERIES = _head_view.SUBSET_QUERIES
SUBSET_QUERY_LIST = _head_view.SUBSET_QUERY_LIST
WHY_KEY = _head_view.WHY_KEY
WHY_PATTERN = _head_view.WHY_PATTERN
WHY_QUERY = _head_view.WHY_QUERY
WHY_SECOND = _head_view.WHY_SECOND
LINE_HEADS = _lines.LINE_HEADS
LINE_LAYER = _lines.LINE_LAYER
LINE_SIDE = _lines.LINE_SIDE
LINE_THRESHOLD = _lines.LINE_THRESHOLD
LINE_TOKEN = _lines.LINE_TOKEN
LINE_WINDOW = _lines.LINE_WINDOW
GRID_RESCALE = _model_view.GRID_RESCALE
PRED_TASK = _prediction.PRED_TASK
TASK_K = _prediction.TASK_K
TASK_METHOD = _prediction.TASK_METHOD
TASK_SEED = _prediction.TASK_SEED
TASK_SIZE = _prediction.TASK_SIZE
TASK_SOURCE = _prediction.TASK_SOURCE
QK_I = _qk.QK_I
QK_J = _qk.QK_J
QK_METHOD = _qk.QK_METHOD
QK_TOP = _qk.QK_TOP
QK_TRANSLATE = _qk.QK_TRANSLATE
DIV_BASELINE = _similarity.DIV_BASELINE
MAP_COLOUR = _similarity.MAP_COLOUR
SIM_KIND = _similarity.SIM_KIND
SIM_ORDER = _similarity.SIM_ORDER
TEACH_DEMO = _teaching.TEACH_DEMO
TEACH_PART = _teaching.TEACH_PART
TEACH_ROW = _teaching.TEACH_ROW
TEACH_START = shared_controls.TEACH_START  # the walkthrough's window: Teaching and Queries and keys share it

# --- the sidebar's inputs (widget keys) ---------------------------------------------------------
MODEL_CHOICE = "model_choice"
MODEL_OTHER = "model_other"
DEVICE = "device"
PRECISION = "precision"  # what the model computes in: "auto", "float32", "bfloat16", "float16"
LOCAL_ATTENTION = "local_attention"
EXAMPLE = "example"
EXAMPLE_UNDO = "_example_undo"  # the text an example sentence replaced, while the box still holds the example
EXAMPLE_UNDO_GO = "example_undo_go"  # the button that puts it back
TEXT = "text"
TARGET = "target"  # an encoder–decoder's target text (empty: the model writes it)
ATTN_PART = "attn_part"  # an encoder–decoder's attention shown: "Encoder", "Decoder" or "Cross"
# Every input the user sets is a widget with persist_state=KEEP: Streamlit keeps its value when a
# page does not draw it or a run ends early (st.switch_page), and the browser's latest value always
# wins (values put back by the app before each run once overrode what a user typed: issue 20).
# The exceptions are NOT_KEPT, below.
KEEP = "session"
TOKEN_LIMIT = "token_limit"
CAPTURE_LAYERS = "capture_layers"
HIDE_SPECIAL = "hide_special"  # hide the special tokens ([CLS], [SEP]…) and renormalise (sinks.drop_tokens)
HIDE_FIRST = "hide_first"  # hide the first token (a decoder's attention sink)
LENS = "lens"  # *Show attention as*: LENS_WEIGHTS or LENS_CONTRIBUTIONS (attribution.as_contributions)
LENS_WEIGHTS = "weights"
LENS_CONTRIBUTIONS = "contributions"

# --- export (export_views): the charts' download format and size
EXPORT_FORMAT = "export_format"  # png or svg: what Plotly's camera button downloads
EXPORT_SIZE = "export_size"  # a key of mha_viz.drawing.style.DOWNLOAD_SIZES
EXPORT_HEADS = "export_heads"  # the heads the HTML report shows, as (layer row, head)
EXPORT_HALF = "export_half"  # the .npz in float16
EXPORT_OPEN = "export_open"  # whether the sidebar's Export box is open: its content is built only then
EXPORT_WAS_OPEN = "_export_open"  # what it was last (boxes.lazy_box), and the two below likewise

# --- what the app computed for this rerun, and the last good result -----------------------------
CURRENT = "_current"  # state.Current of this rerun
LAST_GOOD = "_last_good"  # (run, model, AnalysisKey, EncoderDecoderRun or None) of the last successful analysis
LAST_FULL = "_last_full"  # that run before the sidebar's *Hide tokens* (state.Current.full_run)
GOTO = "_goto_page"  # a page id to switch to at the start of the next run (pages.follow_goto)

# --- the chosen head, shared by the views (plain keys: pages that do not draw a widget keep them)
SEL_LAYER = "sel_layer"  # a row of the run (not the model's layer number when some are captured)
SEL_HEAD = "sel_head"
SEL_CHOSEN = "_sel_chosen"  # something chose the shared head (a picker, a click, a link, a result)
# each page's pickers of it (shared_head.pick_head): set from SEL_LAYER / SEL_HEAD before they are drawn
HEAD_VIEW_LAYER = "head_view_layer"
HEAD_VIEW_HEAD = "head_view_head"

# --- a view shared by link (ui.links) -----------------------------------------------------------
LINK_READ = "_link_read"  # the session's first run has read the URL's query parameters
LINK_PENDING = "_link_pending"  # the link (links.Link) whose layer, head and detail wait for the model
LINK_NOTICES = "_link_notices"  # what the link asked for that was ignored, shown once above the page
DETAIL_LINKED = "_detail_linked"  # a link chose the head view's detail: a new run keeps it (views)
PAGE_RESTORED = "_page_restored"  # the page controls a link just restored (page_controls.just_restored)

# --- a lesson followed (ui.lesson_flow) and built (ui.lesson_panel) -----------------------------
LESSON = "_lesson"  # the mha_viz.export.lesson.Lesson this session follows
LESSON_STEP = "_lesson_step"  # its step on screen, from 0
LESSON_SOURCE = "_lesson_source"  # what a link's `lesson` says to open it again (a name, a packed lesson) or None
LESSON_READ = "_lesson_read"  # the session's first run has looked for a lesson (link, MHA_VIZ_LESSON)
LESSON_MESSAGE = "_lesson_message"  # why a lesson could not be opened, shown once above the page
LESSON_BACK = "lesson_back"
LESSON_NEXT = "lesson_next"
LESSON_RESTORE = "lesson_restore"
LESSON_LEAVE = "lesson_leave"
LESSON_NOTE_BOX = "lesson_note_box"  # the container of the step's note above the view
LESSON_BAR = "lesson_bar"  # the container of the lesson's controls above the view (Step k of N, Back, Next)
LESSON_DRAFT = "_lesson_draft"  # the Lesson being built in the panel
LESSON_TITLE = "lesson_title"  # its title
LESSON_NOTE = "lesson_note"  # the note of the view to add (or of the step being edited)
LESSON_EDIT = "_lesson_edit"  # the step whose note the box edits, or absent
LESSON_ADD = "lesson_add"
LESSON_ROW = "lesson_row_"  # + "up_3", "down_3", "edit_3", "delete_3": a step's buttons
LESSON_DOWNLOAD = "lesson_download"
LESSON_FOLLOW = "lesson_follow"
LESSON_BUNDLED = "lesson_bundled"
LESSON_FILE = "lesson_file"  # a lesson file to open
LESSON_PANEL_MESSAGE = "_lesson_panel_message"  # why the panel could not do what was asked, shown once
LESSON_OPEN = "lesson_open"  # whether the sidebar's Lesson panel is open: its content is built only then
SHARE_OPEN = "share_open"  # whether the sidebar's Share box is open: its link is built only then
LESSON_WAS_OPEN = "_lesson_open"
SHARE_WAS_OPEN = "_share_open"
LINKS_OPEN = "links_open"  # the Head view's Links section (boxes.lazy_box)
LINKS_WAS_OPEN = "_links_open"
STRONGEST_OPEN = "strongest_open"  # its strongest-key table
STRONGEST_WAS_OPEN = "_strongest_open"

# --- model view ---------------------------------------------------------------------------------
GRID = "grid"  # the model grid's selection event
EFFECTIVE_GRID = "effective_grid"  # the Model view's grid of a hybrid's other layers (issue 55)
EFFECTIVE_SHARES = "effective_shares"  # and its table of each mixing layer's share of the token mixing
EFFECTIVE_MEASURES_DF = "effective_measures"  # Head metrics' table of the other layers' measures
EFFECTIVE_KINDS = "effective_kinds"  # Model facts' table of each kind of mixing layer's share
EFFECTIVE_LAYER_PICK = "effective_layer"  # the Head view's other layer
EFFECTIVE_GROUP_PICK = "effective_group"  # and its head or channel group
EFFECTIVE_HEAD = "effective_head"  # and its matrix
# Heads behind a prediction over a task (issue 56: task_section)
TASK_FILE = "task_file"
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
GRID_LAYER = "grid_layer"
GRID_HEAD = "grid_head"

# --- head view ----------------------------------------------------------------------------------
HEAD_DETAIL = "head_detail"
DETAIL_RUN = "_detail_run"  # the run the detail level was chosen for
DETAIL_FORCED = "_detail_forced"  # True when the app, not the user, chose the block view
SUBSET_PRESET = "subset_preset"  # a sentence preset that sets both ranges
SUBSET_RUN = "_subset_run"  # the run the ranges were chosen for

# --- token focus --------------------------------------------------------------------------------

# --- heads behind a prediction (prediction_page) ----------------------------------------------
PRED_PRESET = "pred_preset"  # a preset pair: sets the sidebar's text (clean) and the corrupted text
PRED_CORRUPTED = "pred_corrupted"
PRED_UNDO = "_pred_undo"  # preset_undo.Held: the texts a preset replaced, while the boxes still hold the preset's
PRED_UNDO_GO = "pred_undo_go"  # the button that puts them back
PRED_ANSWER = "pred_answer"  # token texts; empty: each run's prediction
PRED_WRONG = "pred_wrong"
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
PRED_POS_LAYER = "pred_pos_layer"  # the layer of the head × position estimate grid
PRED_POS_FOLLOWS = "_pred_pos_follows"  # the chosen head's row PRED_POS_LAYER was last set to (it follows the head)

# --- line view (lines_page) --------------------------------------------------------------------
LINE_CHART = "line_chart"  # the line chart's selection event (a click on a token focuses it)

# --- metric views -------------------------------------------------------------------------------

# --- compare (compare_page): two sentences on one model, or one sentence on two models ----------
CMP_MODE = "cmp_mode"
CMP_PAIR = "cmp_pair"  # a minimal-pair example: sets the sidebar's text and sentence B
CMP_TEXT_B = "cmp_text_b"
CMP_MODEL_B = "cmp_model_b"
CMP_OTHER_B = "cmp_other_b"
CMP_LOCAL_B = "cmp_local_b"
CMP_LAYER = "cmp_layer"  # the head shown side by side (a row of run A)
CMP_HEAD = "cmp_head"
CMP_GRID = "cmp_grid"  # the change grid's selection event (a click picks the head)

# --- corpus (corpus_page): head statistics over many documents --------------------------------
CORPUS_SOURCE = "corpus_source"  # the bundled sample, an upload or a path
CORPUS_FILE = "corpus_file"  # the uploader
CORPUS_PATH = "corpus_path"
CORPUS_COLUMN = "corpus_column"  # the text column of a .jsonl / .csv
CORPUS_IMPORTANCE = "corpus_importance"
CORPUS_ENGINE = "corpus_engine"
CORPUS_SCATTER_CHART = "corpus_scatter_chart"
CORPUS_SCATTER_PICKED = "_corpus_scatter_picked"
CORPUS_SCATTER_COMPARE = "corpus_scatter_compare"
CORPUS_GO = "corpus_go"  # buttons
CORPUS_CANCEL = "corpus_cancel"
CORPUS_PRUNE = "corpus_prune"
CORPUS_RUNNING = "_corpus_running"  # the CorpusKey being computed: still here on the next run if cancelled
CORPUS_DOCS = "_corpus_docs"  # (source, its texts, the cut, Documents): the last corpus read by this session
CORPUS_MODEL_SEEN = "_corpus_model"  # the model the importance default was set for
CORPUS_LAST = "_corpus_last"  # the CorpusKey of the last statistics this session saw (Head examples reads it)
# --- head examples (examples_page) -----------------------------------------------------------------
EXAMPLES_LAYER = "examples_layer"
EXAMPLES_HEAD = "examples_head"
EXAMPLES_FINDER = "examples_finder"  # the finder's selection event
EXAMPLES_TO_CORPUS = "examples_to_corpus"
RETRIEVAL_LENGTH = _retrieval.RETRIEVAL_LENGTH  # Retrieval heads: the prompt's length and the needle's depths
RETRIEVAL_DEPTHS = _retrieval.RETRIEVAL_DEPTHS
RETRIEVAL_NEEDLE = "retrieval_needle"  # the needle sentence and the question after it
RETRIEVAL_QUESTION = "retrieval_question"
RETRIEVAL_GO = "retrieval_go"  # buttons
RETRIEVAL_CANCEL = "retrieval_cancel"
RETRIEVAL_GRID = "retrieval_grid"  # the grid's selection event
RETRIEVAL_LOOK = "retrieval_look"
RETRIEVAL_LAYER = "retrieval_layer"
RETRIEVAL_HEAD = "retrieval_head"
RETRIEVAL_RUNNING = "_retrieval_running"  # what the job was for: still here on the next run if cancelled
RETRIEVAL_FOUND = "_retrieval_found"  # (what it was for, `tasks.retrieval.Retrieval`): the session's last result
EXAMPLES_OPEN = "examples_open"  # a head view's button to that head's examples
CORPUS_PRUNED = "_corpus_pruned"  # {CorpusKey: DataFrame}: pruning curves on the held-out documents

# --- teaching and switching heads off -----------------------------------------------------------
TEACH_PICK = "teach_pick"  # "induction": open the teaching view on toy-induction's induction head
TEACH_LAYER = "teach_layer"
TEACH_HEAD = "teach_head"
HEADS_ON = "_heads_on"  # {ModelKey: bool (layers, heads)}
HEADS_VERSION = "_heads_version"  # bumped when the app changes the on/off grid (a fresh editor)
IMPORTANCE_DONE = "_imp_done"  # the AnalysisKeys whose importance was asked for
PRUNING_DONE = "_prune_done"

# --- queries and keys (qk_page) ---------------------------------------------------------------
QK_LAYER = "qk_layer"
QK_HEAD = "qk_head"
WHY_TERMS = "why_terms"  # its two charts
WHY_BARS = "why_bars"
COMP_MATRIX = "comp_matrix"  # its charts and table
COMP_TABLE = "comp_table"
COMP_COPYING = "comp_copying"
COMP_GO = "comp_go"  # Head composition: compute a large model's scores
QK_MAP = "qk_map"  # the query/key map's selection event (a click on a query sets QK_I)

# --- generate -----------------------------------------------------------------------------------
GEN_LAYER = "gen_layer"  # a row of the generation's run
GEN_HEAD = "gen_head"
GEN_GO = "gen_go"  # buttons
GEN_STOP = "gen_stop"
GEN_PLAY = "gen_play"
GEN_PAUSE = "gen_pause"
GEN_ANALYSE = "gen_analyse"
GEN_USE = "gen_use_"  # + a model name: the buttons that switch an encoder to a decoder
GEN_LAST = "_gen_last"  # (GenKey, Generation, note or None): the last good generation
GEN_PARTIAL = "_gen_partial"  # (GenKey, Generation so far or None) while one streams; left there if stopped
GEN_STEP_NEXT = "_gen_step_next"  # (step *Play* reached, slider value it started from): for the next run


# --- the pages' other widgets (charts' selection events, tables, toggles, downloads), by module -----
# ablation_page
ABLATION_PREDS_PREFIX = "preds_"
DL_IMP = "dl_imp"
DL_PRUNE = "dl_prune"
HEADS_ALL_ON = "heads_all_on"
HEADS_GRID_PREFIX = "heads_grid_"
HEADS_LAYER_OFF = "heads_layer_off"
HEADS_LAYER_PICK = "heads_layer_pick"
IMP_APPLY = "imp_apply"
IMP_GO = "imp_go"
IMP_GRID = "imp_grid"
IMP_K = "imp_k"
PRUNE_FIG = "prune_fig"
PRUNE_GO = "prune_go"
# compare_page
CMP_DEPTH = "cmp_depth"
CMP_SIDE = "cmp_side"
CMP_TABLE_DF = "cmp_table_df"
DL_CMP = "dl_cmp"
# corpus_page
CORPUS_DEVIATION = "corpus_deviation"
CORPUS_IMPORTANCE_GRID = "corpus_importance_grid"
CORPUS_MEAN = "corpus_mean"
CORPUS_PATTERNS = "corpus_patterns"
CORPUS_PRUNING = "corpus_pruning"
CORPUS_SD = "corpus_sd"
CORPUS_VERSUS = "corpus_versus"
DL_CORPUS = "dl_corpus"
DL_CORPUS_PRUNE = "dl_corpus_prune"
# examples_page
EXAMPLES_DISTANCES = "examples_distances"
EXAMPLES_SCORES = "examples_scores"
EXAMPLES_TOKENS_PREFIX = "examples_"
# export_views
DL_NPZ = "dl_npz"
DL_REPORT = "dl_report"
# focus_page
FOCUS_GRID_PREFIX = "focus_grid_"
FOCUS_HEADS_PREFIX = "focus_heads_"
FOCUS_SUMMARY_PREFIX = "focus_summary_"
# lines_page
LINE_CLEAR = "line_clear"
# the metric pages
CMP_HEATMAP_PREFIX = "cmp_"
CMP_PAIRS = "cmp_pairs"
CMP_TABLE = "cmp_table"
DIV_CHART = "div_chart"
DIV_TABLE = "div_table"
DL_LAYERS = "dl_layers"
DL_SIM = "dl_sim"
DL_TABLE = "dl_table"
HEAD_MAP = "head_map"
HEAD_TABLE_DF = "head_table_df"
LAYERS_MATRIX = "layers_matrix"
METRIC_GRID = "metric_grid"
METRIC_TYPES = "metric_types"  # the grid of head types (its selection events)
# every head on two measures (head_scatter_view): the axes, the colour, the chart (its selection events), the
# heads a box or lasso picked, and the button that compares them
SCATTER_CHART = "scatter_chart"
SCATTER_PICKED = "_scatter_picked"
SCATTER_COMPARE = "scatter_compare"
SIM_MATRIX = "sim_matrix"
# prediction_page
DL_PRED = "dl_pred"
DL_PRED_POSITIONS = "dl_pred_positions"
PRED_CLEAN_HEAD = "pred_clean_head"
PRED_CORRUPTED_HEAD = "pred_corrupted_head"
PRED_POSITIONS = "pred_positions"
PRED_POSITION_GRID = "pred_position_grid"
PRED_SCATTER = "pred_scatter"
PRED_TOKENS = "pred_tokens"
PRED_WEIGHTED_HEAD = "pred_weighted_head"
# qk_page
QK_NEURON = "qk_neuron"
# seq2seq_views
CROSS_FOCUS_GRID = "cross_focus_grid"
CROSS_HEATMAP = "cross_heatmap"
CROSS_METRIC_GRID = "cross_metric_grid"
CROSS_TABLE_DF = "cross_table_df"
DL_CROSS_TABLE = "dl_cross_table"
S2S_STEP_PREFIX = "s2s_step_"
# teaching_page
TEACH_COSTS = "teach_costs"
TEACH_DEMO_HEAD_PREFIX = "demo_head_"
TEACH_DEMO_MEAN = "demo_mean"
TEACH_GQA = "teach_gqa"
TEACH_SOFTMAX_ROW = "teach_softmax_row"
TEACH_STEP2_PREFIX = "step_2_"
TEACH_STEP_PREFIX = "step_"
TEACH_USE_TOY = "use_toy"
# views
DL_FACTS = "dl_facts"
GRID_OPEN_HEAD = "open_head"
HEAD_HEATMAP = "head_heatmap"
LEARNED_SINK_GRID = "learned_sink_grid"
LENS_JS_GRID = "lens_js_grid"
SINK_MASS_GRID = "sink_mass_grid"


# --- the Circuit section of Heads behind a prediction (circuit_section) ------------------------------
CIRC_METHOD = "circ_method"  # "EAP" or "EAP-IG"
CIRC_K = "circ_k"  # edges drawn
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
CIRC_FILE = "circ_file"  # a saved circuit (JSON) to open
CIRC_OPENED = "_circ_opened"  # the file id of the saved circuit opened last (opened once)
CIRC_PENDING = "_circ_pending"  # a saved circuit waiting for its pair to be on the page
CIRC_OPEN_PAIR = "circ_open_pair"  # the button that puts a saved circuit's pair on the page
DL_CIRC_CSV = "dl_circ_csv"
DL_CIRC_JSON = "dl_circ_json"
PRED_AUTO = "_pred_auto"  # a link asked for a circuit: the heads, then the circuit, are found once on opening
CIRC_AUTO = "_circ_auto"

# --- *Open as notebook* (notebook_button): what the page drawn in this rerun chose, and its download
NOTEBOOK_OPTIONS = "_notebook_options"  # {option: value} a page recorded for its notebook this rerun
DL_NOTEBOOK = "dl_notebook"


# --- the input widgets drawn without persist_state=KEEP, and why (docs/architecture.md, "Session state";
# tests/unit/test_ui_house.py checks that every other input widget keeps its value) --------------
NOT_KEPT = frozenset({
    # the pickers of the head the pages share (shared_head.pick_head): each is set from the plain SEL_LAYER /
    # SEL_HEAD, which are kept, before it is drawn, and writes them back when the user picks
    HEAD_VIEW_LAYER, HEAD_VIEW_HEAD, EXAMPLES_LAYER, EXAMPLES_HEAD, PRED_LAYER, PRED_HEAD, QK_LAYER, QK_HEAD,
    TEACH_LAYER, TEACH_HEAD, CMP_LAYER, CMP_HEAD, GEN_LAYER, GEN_HEAD, RETRIEVAL_LAYER, RETRIEVAL_HEAD,
    # a layer, head, position or range of the run on screen: clamped to each new run (session.settle)
    # and meant to start afresh with it
    HEADS_LAYER_PICK, GRID_LAYER, GRID_HEAD, PRED_POS_LAYER, QK_I, QK_J, WHY_QUERY, WHY_KEY, WHY_SECOND,
    CROSS_FOCUS_TOKEN, LAYERS_LAYER,
    LAYERS_HEAD, HEAD_WINDOW, S2S_STEP, TEACH_ROW, IMP_K, COMPARE_HEADS, SUBSET_QUERIES, SUBSET_KEYS,
    SUBSET_QUERY_LIST, SUBSET_KEY_LIST,
    # chosen by the app for each new run (blocks for a long input), or by a link: HEAD_DETAIL
    HEAD_DETAIL,
    # presets that act once: their on_change sets other inputs, which are kept
    CMP_PAIR, SUBSET_PRESET,
    # the on/off grid, drawn under a new key whenever the app changes it (HEADS_ON keeps the heads)
    HEADS_GRID_PREFIX,
    # an upload: the documents read from it are kept (CORPUS_DOCS), not the browser's file
    CORPUS_FILE, CIRC_FILE, LESSON_FILE, TASK_FILE,
})

# --- Token focus: heads found from two tokens (issue 54) --------------------------------------------
FOCUS_KEY_AUTO = "_focus_key_auto"  # the key the page chose (the strongest), which follows the token in focus
FOCUS_RANKED = "focus_ranked"  # the bars of the top heads (a click opens one)
FOCUS_OPEN_TOP = "focus_open_top"  # the button that opens the strongest of them in the Head view
HEAD_FIND_HEADS = "head_find_heads"  # the Head view's button: Token focus on the query and key of a cell

# --- Head similarity at length (issue 52) ------------------------------------------------------------
SIM_START = "sim_start"  # the button that starts a comparison of every pair of heads whose cost was stated
CMP_START = "cmp_start"  # the button that starts comparing two long runs head by head, its cost stated
COST_ACCEPTED = "_cost_accepted"  # what the user accepted to wait for in this session (cost_prompt.accepted)

# --- the Head view's *Links* section (head_links_view; issue 52: what the Whole text page showed) -----------
LINKS_STRIP_CHART = "links_strip_chart"
LINKS_QUERY = "links_query"  # the query whose kept keys and exact row are shown
LINKS_QUERY_DEFAULT = "_links_query_default"  # the query the section last chose (one that keeps keys)
LINKS_DISTANCES = "links_distances"
LINKS_ROW_KEYS = "links_row_keys"  # the keys the exact row shows (a range; the whole row by default)
LINKS_ROW_CHART = "links_row_chart"
