"""The names the UI finds things by: every `st.session_state` key, and nothing else.

Only `ui/session.py` reads and writes them. The widgets the user's choices live under keep their
values across page switches (drawn with `persist_state=KEEP`), except those in NOT_KEPT; keys
starting with "_" are the app's own bookkeeping. What a cached result was computed from is a tuple
where it is used (`analysis_key.AnalysisKey`, the pages' own keys of a result).
"""

from __future__ import annotations

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
LENS_WEIGHTS, LENS_CONTRIBUTIONS = "weights", "contributions"

# --- export (export_views): the charts' download format and size
EXPORT_FORMAT = "export_format"  # png or svg: what Plotly's camera button downloads
EXPORT_SIZE = "export_size"  # a key of mha_viz.figures.style.DOWNLOAD_SIZES
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
HEAD_VIEW_LAYER, HEAD_VIEW_HEAD = "head_view_layer", "head_view_head"

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
LESSON_BACK, LESSON_NEXT, LESSON_RESTORE, LESSON_LEAVE = "lesson_back", "lesson_next", "lesson_restore", "lesson_leave"
LESSON_NOTE_BOX = "lesson_note_box"  # the container of the step's note above the view
LESSON_BAR = "lesson_bar"  # the container of the lesson's controls above the view (Step k of N, Back, Next)
LESSON_DRAFT = "_lesson_draft"  # the Lesson being built in the panel
LESSON_TITLE = "lesson_title"  # its title
LESSON_NOTE = "lesson_note"  # the note of the view to add (or of the step being edited)
LESSON_EDIT = "_lesson_edit"  # the step whose note the box edits, or absent
LESSON_ADD = "lesson_add"
LESSON_ROW = "lesson_row_"  # + "up_3", "down_3", "edit_3", "delete_3": a step's buttons
LESSON_DOWNLOAD, LESSON_FOLLOW, LESSON_BUNDLED = "lesson_download", "lesson_follow", "lesson_bundled"
LESSON_FILE = "lesson_file"  # a lesson file to open
LESSON_PANEL_MESSAGE = "_lesson_panel_message"  # why the panel could not do what was asked, shown once
LESSON_OPEN = "lesson_open"  # whether the sidebar's Lesson panel is open: its content is built only then
SHARE_OPEN = "share_open"  # whether the sidebar's Share box is open: its link is built only then
LESSON_WAS_OPEN, SHARE_WAS_OPEN = "_lesson_open", "_share_open"
LINKS_OPEN, LINKS_WAS_OPEN = "links_open", "_links_open"  # the Head view's Links section (boxes.lazy_box)
STRONGEST_OPEN, STRONGEST_WAS_OPEN = "strongest_open", "_strongest_open"  # its strongest-key table

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
PRED_TASK = "pred_task"  # one pair or a task
TASK_SOURCE = "task_source"  # a generator, or a file
TASK_SIZE = "task_size"
TASK_SEED = "task_seed"
TASK_METHOD = "task_method"
TASK_FILE = "task_file"
TASK_GO = "task_go"
TASK_CANCEL = "task_cancel"
TASK_RUNNING = "_task_running"  # what the running job is for (jobs.run)
TASK_RESULT = "_task_result"  # (TaskKey, the result over the set)
TASK_GRID = "task_grid"
DL_TASK = "dl_task"
TASK_K = "task_k"  # the edges drawn of a task's circuit (task_edges)
TASK_GRAPH = "task_graph"
TASK_EDGES_DF = "task_edges"
TASK_FAITH = "_task_faith"  # {task key: its faithfulness over the pairs}
TASK_FAITH_GO = "task_faith_go"
TASK_FAITH_CANCEL = "task_faith_cancel"
TASK_FAITH_RUNNING = "_task_faith_running"
GRID_RESCALE = "grid_rescale"
GRID_LAYER = "grid_layer"
GRID_HEAD = "grid_head"

# --- head view ----------------------------------------------------------------------------------
HEAD_DETAIL = "head_detail"
HEAD_WINDOW = "head_window"
DETAIL_RUN = "_detail_run"  # the run the detail level was chosen for
DETAIL_FORCED = "_detail_forced"  # True when the app, not the user, chose the block view
SUBSET_QUERIES = "subset_queries"  # (start, stop) of the queries shown in the "queries × keys" detail
SUBSET_KEYS = "subset_keys"  # (start, stop) of the keys shown
SUBSET_PRESET = "subset_preset"  # a sentence preset that sets both ranges
SUBSET_RUN = "_subset_run"  # the run the ranges were chosen for
SUBSET_PICK = "subset_pick"  # pick-lists instead of ranges
SUBSET_QUERY_LIST = "subset_query_list"  # the picked query positions
SUBSET_KEY_LIST = "subset_key_list"  # the picked key positions

# --- token focus --------------------------------------------------------------------------------
FOCUS_TOKEN = "focus_token"  # the token (or word) position in focus
FOCUS_LEVEL = "focus_level"  # tokens or words
FOCUS_SHOW = "focus_show"  # which direction(s) to draw
FOCUS_RESCALE = "focus_rescale"
FOCUS_SUMMARIES = "focus_summaries"  # the four summary panels and the strongest-head map (off: two grids)

# --- heads behind a prediction (prediction_page) ----------------------------------------------
PRED_PRESET = "pred_preset"  # a preset pair: sets the sidebar's text (clean) and the corrupted text
PRED_CORRUPTED = "pred_corrupted"
PRED_UNDO = "_pred_undo"  # preset_undo.Held: the texts a preset replaced, while the boxes still hold the preset's
PRED_UNDO_GO = "pred_undo_go"  # the button that puts them back
PRED_ANSWER, PRED_WRONG = "pred_answer", "pred_wrong"  # token texts; empty: each run's prediction
PRED_GO, PRED_CANCEL = "pred_go", "pred_cancel"
PRED_RESULT = "_pred_result"  # (PredKey, prediction.Explanation) of the last result
PRED_RUNNING = "_pred_running"  # set while the estimate runs: still here on the next run when it was cancelled
PRED_EXTRA = "_pred_extra"  # {(PredKey, layer, head, what): result} of the one-head panel
PRED_LAYER, PRED_HEAD = "pred_layer", "pred_head"  # the head opened in the one-head panel
PRED_DLA_GRID, PRED_RESTORED_GRID = "pred_dla_grid", "pred_restored_grid"  # the grids' selection events
PRED_ESTIMATE_GRID = "pred_estimate_grid"
PRED_REAL_GO, PRED_REAL_CANCEL = "pred_real_go", "pred_real_cancel"  # real patching, after the estimate
PRED_REAL_RUNNING = "_pred_real_running"  # set while real patching runs (as PRED_RUNNING)
PRED_POS_LAYER = "pred_pos_layer"  # the layer of the head × position estimate grid
PRED_POS_FOLLOWS = "_pred_pos_follows"  # the chosen head's row PRED_POS_LAYER was last set to (it follows the head)

# --- line view (lines_page) --------------------------------------------------------------------
LINE_LAYER, LINE_HEADS, LINE_THRESHOLD = "line_layer", "line_heads", "line_threshold"
LINE_SIDE, LINE_TOKEN, LINE_WINDOW = "line_side", "line_token", "line_window"  # LINE_TOKEN: -1 = no focus
LINE_CHART = "line_chart"  # the line chart's selection event (a click on a token focuses it)

# --- metric views -------------------------------------------------------------------------------
SIM_KIND = "sim_kind"
COMPARE_HEADS = "compare_heads"
COMPARE_RESCALE = "compare_rescale"  # Compare heads: each head on its own 0..max

# --- compare (compare_page): two sentences on one model, or one sentence on two models ----------
CMP_MODE = "cmp_mode"
CMP_PAIR = "cmp_pair"  # a minimal-pair example: sets the sidebar's text and sentence B
CMP_TEXT_B = "cmp_text_b"
CMP_MODEL_B, CMP_OTHER_B, CMP_LOCAL_B = "cmp_model_b", "cmp_other_b", "cmp_local_b"
CMP_LAYER, CMP_HEAD = "cmp_layer", "cmp_head"  # the head shown side by side (a row of run A)
CMP_METRIC = "cmp_metric"  # models of different shapes: the metric compared by depth
CMP_GRID = "cmp_grid"  # the change grid's selection event (a click picks the head)

# --- corpus (corpus_page): head statistics over many documents --------------------------------
CORPUS_SOURCE = "corpus_source"  # the bundled sample, an upload or a path
CORPUS_FILE = "corpus_file"  # the uploader
CORPUS_PATH = "corpus_path"
CORPUS_COLUMN = "corpus_column"  # the text column of a .jsonl / .csv
CORPUS_TOKENS = "corpus_tokens"  # tokens per document
CORPUS_FIRST = "corpus_first"  # use the corpus's first N documents only (0: all)
CORPUS_BATCH = "corpus_batch"
CORPUS_IMPORTANCE = "corpus_importance"
CORPUS_ENGINE = "corpus_engine"
CORPUS_METRIC = "corpus_metric"
CORPUS_SCATTER_X, CORPUS_SCATTER_Y = "corpus_scatter_x", "corpus_scatter_y"  # every head on two measures
CORPUS_SCATTER_COLOUR, CORPUS_SCATTER_CHART = "corpus_scatter_colour", "corpus_scatter_chart"
CORPUS_SCATTER_PICKED, CORPUS_SCATTER_COMPARE = "_corpus_scatter_picked", "corpus_scatter_compare"
CORPUS_GO, CORPUS_CANCEL, CORPUS_PRUNE = "corpus_go", "corpus_cancel", "corpus_prune"  # buttons
CORPUS_RUNNING = "_corpus_running"  # the CorpusKey being computed: still here on the next run if cancelled
CORPUS_DOCS = "_corpus_docs"  # (source, its texts, the cut, Documents): the last corpus read by this session
CORPUS_MODEL_SEEN = "_corpus_model"  # the model the importance default was set for
CORPUS_LAST = "_corpus_last"  # the CorpusKey of the last statistics this session saw (Head examples reads it)
# --- head examples (examples_page) -----------------------------------------------------------------
EXAMPLES_LAYER, EXAMPLES_HEAD = "examples_layer", "examples_head"
EXAMPLES_X, EXAMPLES_Y, EXAMPLES_RANK = "examples_x", "examples_y", "examples_rank"  # the finder's axes, ranking
EXAMPLES_FINDER = "examples_finder"  # the finder's selection event
EXAMPLES_TO_CORPUS = "examples_to_corpus"
EXAMPLES_OPEN = "examples_open"  # a head view's button to that head's examples
CORPUS_PRUNED = "_corpus_pruned"  # {CorpusKey: DataFrame}: pruning curves on the held-out documents

# --- teaching and switching heads off -----------------------------------------------------------
TEACH_PICK = "teach_pick"  # "induction": open the teaching view on toy-induction's induction head
TEACH_LAYER = "teach_layer"
TEACH_HEAD = "teach_head"
TEACH_PART = "teach_part"  # which part of the page is drawn: a group of steps, the costs, the demonstrations
TEACH_DEMO = "teach_demo"
TEACH_START = "teach_start"  # the walkthrough's window: its first token (Teaching and Queries and keys share it)
HEADS_ON = "_heads_on"  # {ModelKey: bool (layers, heads)}
HEADS_VERSION = "_heads_version"  # bumped when the app changes the on/off grid (a fresh editor)
IMPORTANCE_DONE = "_imp_done"  # the AnalysisKeys whose importance was asked for
PRUNING_DONE = "_prune_done"

# --- queries and keys (qk_page) ---------------------------------------------------------------
QK_LAYER, QK_HEAD = "qk_layer", "qk_head"
QK_I, QK_J = "qk_i", "qk_j"  # query and key positions of the neuron view
QK_METHOD, QK_TRANSLATE, QK_TOP = "qk_method", "qk_translate", "qk_top"
WHY_QUERY, WHY_KEY, WHY_SECOND = "why_query", "why_key", "why_second"  # Head view's *Why here?*: positions
WHY_PATTERN = "why_pattern"  # *Why here?*: the whole head's pattern-weighted terms instead of one cell
WHY_TERMS, WHY_BARS = "why_terms", "why_bars"  # its two charts
COMP_KIND, COMP_ABOVE = "comp_kind", "comp_above"  # Head composition: Q, K or V; shown above × the baseline
COMP_MATRIX, COMP_TABLE, COMP_COPYING = "comp_matrix", "comp_table", "comp_copying"  # its charts and table
COMP_GO = "comp_go"  # Head composition: compute a large model's scores
QK_MAP = "qk_map"  # the query/key map's selection event (a click on a query sets QK_I)

# --- generate -----------------------------------------------------------------------------------
GEN_MAX_NEW = "gen_max_new"
GEN_TEMPERATURE = "gen_temperature"
GEN_TOP_K = "gen_top_k"
GEN_TOP_P = "gen_top_p"
GEN_SEED = "gen_seed"
GEN_STEP = "gen_step"  # 1-based step of the slider
GEN_LAYER = "gen_layer"  # a row of the generation's run
GEN_HEAD = "gen_head"
GEN_RESCALE = "gen_rescale"
GEN_GO, GEN_STOP, GEN_PLAY, GEN_PAUSE = "gen_go", "gen_stop", "gen_play", "gen_pause"  # buttons
GEN_ANALYSE = "gen_analyse"
GEN_USE = "gen_use_"  # + a model name: the buttons that switch an encoder to a decoder
GEN_LAST = "_gen_last"  # (GenKey, Generation, note or None): the last good generation
GEN_PARTIAL = "_gen_partial"  # (GenKey, Generation so far or None) while one streams; left there if stopped
GEN_STEP_NEXT = "_gen_step_next"  # (step *Play* reached, slider value it started from): for the next run


# --- the pages' other widgets (charts' selection events, tables, toggles, downloads), by module -----
# ablation_page
ABLATE_MODE = "ablate_mode"
ABLATION_OTHER = "ablation_other"
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
IMP_SOURCE = "imp_source"
PRUNE_FIG = "prune_fig"
PRUNE_GO = "prune_go"
# compare_page
CMP_DEPTH = "cmp_depth"
CMP_RESCALE = "cmp_rescale"
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
DIV_BASELINE = "div_baseline"
DIV_CHART = "div_chart"
DIV_TABLE = "div_table"
DL_LAYERS = "dl_layers"
DL_SIM = "dl_sim"
DL_TABLE = "dl_table"
HEAD_MAP = "head_map"
HEAD_TABLE_DF = "head_table_df"
LAYERS_HEAD = "layers_head"
LAYERS_LAYER = "layers_layer"
LAYERS_MATRIX = "layers_matrix"
LAYERS_METHOD = "layers_method"
MAP_COLOUR = "map_colour"
METRIC_CHOICE = "metric_choice"
METRIC_GRID = "metric_grid"
METRIC_TYPES = "metric_types"  # the grid of head types (its selection events)
# every head on two measures (head_scatter_view): the axes, the colour, the chart (its selection events), the
# heads a box or lasso picked, and the button that compares them
SCATTER_X, SCATTER_Y, SCATTER_COLOUR = "scatter_x", "scatter_y", "scatter_colour"
SCATTER_CHART, SCATTER_PICKED, SCATTER_COMPARE = "scatter_chart", "_scatter_picked", "scatter_compare"
SIM_MATRIX = "sim_matrix"
SIM_ORDER = "sim_order"
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
CROSS_FOCUS_RESCALE = "cross_focus_rescale"
CROSS_FOCUS_SIDE = "cross_focus_side"
CROSS_FOCUS_TOKEN = "cross_focus_token"
CROSS_HEATMAP = "cross_heatmap"
CROSS_METRIC_CHOICE = "cross_metric_choice"
CROSS_METRIC_GRID = "cross_metric_grid"
CROSS_TABLE_DF = "cross_table_df"
DL_CROSS_TABLE = "dl_cross_table"
HEAD_RESCALE = "head_rescale"
S2S_STEP = "s2s_step"
S2S_STEP_PREFIX = "s2s_step_"
# teaching_page
TEACH_COSTS = "teach_costs"
TEACH_DEMO_HEAD_PREFIX = "demo_head_"
TEACH_DEMO_MEAN = "demo_mean"
TEACH_GQA = "teach_gqa"
TEACH_ROW = "teach_row"
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
CIRC_GO, CIRC_CANCEL = "circ_go", "circ_cancel"
CIRC_RUNNING = "_circ_running"  # set while the edges are estimated (jobs.run)
CIRC_RESULTS = "_circ_results"  # {(PredKey, method): Edges} of the pair on screen
CIRC_GRAPH = "circ_graph"  # the graph's selection events
CIRC_PICKED = "_circ_picked"  # (PredKey, method, sender, receiver): the edge clicked last
CIRC_REAL = "_circ_real"  # {(PredKey, ...): a value run for real}: edges clicked, the chosen k, the top 20
CIRC_TOP_GO = "circ_top_go"  # patch the top 20 edges for real
CIRC_REAL_CANCEL = "circ_real_cancel"  # Cancel while something runs for real
CIRC_REAL_RUNNING = "_circ_real_running"  # set while it runs (jobs.run)
CIRC_STOPPED = "_circ_stopped"  # {(PredKey, what)} cancelled: run again only when asked
CIRC_AGAIN_K, CIRC_AGAIN_EDGE = "circ_again_k", "circ_again_edge"  # run a cancelled one again
CIRC_FILE = "circ_file"  # a saved circuit (JSON) to open
CIRC_OPENED = "_circ_opened"  # the file id of the saved circuit opened last (opened once)
CIRC_PENDING = "_circ_pending"  # a saved circuit waiting for its pair to be on the page
CIRC_OPEN_PAIR = "circ_open_pair"  # the button that puts a saved circuit's pair on the page
DL_CIRC_CSV, DL_CIRC_JSON = "dl_circ_csv", "dl_circ_json"
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
    TEACH_LAYER, TEACH_HEAD, CMP_LAYER, CMP_HEAD, GEN_LAYER, GEN_HEAD,
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
FOCUS_KEY = "focus_key"  # the key the token in focus looks at: every head ranked by that weight (focus_pair)
FOCUS_KEY_AUTO = "_focus_key_auto"  # the key the page chose (the strongest), which follows the token in focus
FOCUS_RANKED = "focus_ranked"  # the bars of the top heads (a click opens one)
FOCUS_OPEN_TOP = "focus_open_top"  # the button that opens the strongest of them in the Head view
HEAD_FIND_HEADS = "head_find_heads"  # the Head view's button: Token focus on the query and key of a cell

# --- Head similarity at length (issue 52) ------------------------------------------------------------
SIM_START = "sim_start"  # the button that starts a comparison of every pair of heads whose cost was stated
CMP_START = "cmp_start"  # the button that starts comparing two long runs head by head, its cost stated
COST_ACCEPTED = "_cost_accepted"  # what the user accepted to wait for in this session (cost_prompt.accepted)

# --- the Head view's *Links* section (head_links_view; issue 52: what the Whole text page showed) -----------
LINKS_STRIP = "links_strip"  # the token strip's first query
LINKS_STRIP_CHART = "links_strip_chart"
LINKS_QUERY = "links_query"  # the query whose kept keys and exact row are shown
LINKS_QUERY_DEFAULT = "_links_query_default"  # the query the section last chose (one that keeps keys)
LINKS_SKIP_FIRST = "links_skip_first"  # leave out links to the first token
LINKS_DISTANCES = "links_distances"
LINKS_ROW_KEYS = "links_row_keys"  # the keys the exact row shows (a range; the whole row by default)
LINKS_ROW_CHART = "links_row_chart"
