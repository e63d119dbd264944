"""The names the UI finds things by: every `st.session_state` key, and nothing else.

Only `ui/kit/session.py` reads and writes them. The widgets the user's choices live under keep their
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
CHAT_MODE = "chat_mode"  # *Input*: "Text" or "Chat" (an instruct model's chat template: shell/chat_input.py)
CHAT_SYSTEM = "chat_system"
CHAT_USER = "chat_user"
CHAT_REPLY = "chat_reply"
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
HIDE_TEMPLATE = "hide_template"  # on a chat, hide the chat template's own tokens (role headers, turn ends)
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
GOTO = "_goto_page"  # a page id to switch to at the start of the next run (navigation.follow_goto)

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
LESSON_BAR = "lesson_bar"  # the container of the lesson's controls at the main area's foot (Step k of N, Back, Next)
LESSON_DRAFT = "_lesson_draft"  # the Lesson being built in the panel
LESSON_REPLACED = "_lesson_replaced"  # the lesson being built that opening another replaced, for one Undo
LESSON_REPLACED_GO = "lesson_replaced_go"
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

# --- model view ---------------------------------------------------------------------------------
GRID = "grid"  # the model grid's selection event
EFFECTIVE_GRID = "effective_grid"  # the Model view's grid of a hybrid's other layers (issue 55)
EFFECTIVE_SHARES = "effective_shares"  # and its table of each mixing layer's share of the token mixing
EFFECTIVE_MEASURES_DF = "effective_measures"  # Head metrics' table of the other layers' measures
EFFECTIVE_KINDS = "effective_kinds"  # Model facts' table of each kind of mixing layer's share
SPARSE_LAYERS = "sparse_layers"  # Model facts' table of a sparse model's indexed layers (`sparse_picks`)
SPARSE_HEADS = "sparse_heads"  # and of their every head
MEMORY_LAYERS = "memory_layers"  # Model facts' table of a compressed-memory model's layers (`memory_view`)
MEMORY_HEADS = "memory_heads"  # and of their every head
MEMORY_HEATMAP = "memory_heatmap"  # the Head view's compressed memory entries of a head
MEMORY_SPLIT = "memory_split"  # and its layer's split of each head's rows
MEMORY_GRID = "memory_grid"  # the Model view's grid of each head's share on the compressed memory
EFFECTIVE_LAYER_PICK = "effective_layer"  # the Head view's other layer
EFFECTIVE_GROUP_PICK = "effective_group"  # and its head or channel group
EFFECTIVE_HEAD = "effective_head"  # and its matrix

# --- head view ----------------------------------------------------------------------------------
HEAD_DETAIL = "head_detail"

# --- the corpus' statistics a session saw last, which Head examples reads ---------------------------
CORPUS_LAST = "_corpus_last"  # the CorpusKey of the last statistics this session saw (Head examples reads it)
# --- head examples ----------------------------------------------------------------------------------
EXAMPLES_OPEN = "examples_open"  # a head view's button to that head's examples

# --- teaching and switching heads off -----------------------------------------------------------
HEADS_ON = "_heads_on"  # {ModelKey: bool (layers, heads)}
HEADS_VERSION = "_heads_version"  # bumped when the app changes the on/off grid (a fresh editor)

# --- queries and keys (qk_page) ---------------------------------------------------------------
WHY_TERMS = "why_terms"  # its two charts
WHY_BARS = "why_bars"

# --- generate -----------------------------------------------------------------------------------


# --- the pair of *Heads behind a prediction* and *Circuit behind a prediction* (shell/pair.py): its preset (its
# texts are shared controls, `export/shared_controls.PAIR`)
PRED_PRESET = "pred_preset"  # a preset pair: sets the sidebar's text (clean) and the corrupted text
PRED_UNDO = "_pred_undo"  # pair.Held: the texts a preset replaced, while the boxes still hold the preset's
PRED_UNDO_GO = "pred_undo_go"  # the button that puts them back

# --- the pages' other widgets (charts' selection events, tables, toggles, downloads), by module -----
# export_views
DL_NPZ = "dl_npz"
DL_REPORT = "dl_report"
# seq2seq_views
CROSS_FOCUS_GRID = "cross_focus_grid"
CROSS_HEATMAP = "cross_heatmap"
CROSS_METRIC_GRID = "cross_metric_grid"
CROSS_TABLE_DF = "cross_table_df"
DL_CROSS_TABLE = "dl_cross_table"
S2S_STEP_PREFIX = "s2s_step_"
HEAD_HEATMAP = "head_heatmap"


# --- *Open as notebook* (notebook_button): what the page drawn in this rerun chose, and its download
NOTEBOOK_OPTIONS = "_notebook_options"  # {option: value} a page recorded for its notebook this rerun
DL_NOTEBOOK = "dl_notebook"


# --- the input widgets drawn without persist_state=KEEP, and why (docs/architecture.md, "Session state";
# tests/unit/test_ui_house.py checks that every other input widget keeps its value) --------------
NOT_KEPT = frozenset({
    # the pickers of the head the pages share (shared_head.pick_head): each is set from the plain SEL_LAYER /
    # SEL_HEAD, which are kept, before it is drawn, and writes them back when the user picks (each page's own
    # pickers and positions are in its NOT_KEPT, `features/<id>/controls.py`, for the same reason)
    HEAD_VIEW_LAYER, HEAD_VIEW_HEAD,
    # a layer, head, position or range of the run on screen: clamped to each new run (session.settle)
    # chosen by the app for each new run (blocks for a long input), or by a link: HEAD_DETAIL
    HEAD_DETAIL,
    # an upload: the lesson read from it is kept, not the browser's file
    LESSON_FILE,
})

# --- Token focus: heads found from two tokens (issue 54) --------------------------------------------
FOCUS_KEY_AUTO = "_focus_key_auto"  # the key the page chose (the strongest), which follows the token in focus
FOCUS_RANKED = "focus_ranked"  # the bars of the top heads (a click opens one)
FOCUS_OPEN_TOP = "focus_open_top"  # the button that opens the strongest of them in the Head view
HEAD_FIND_HEADS = "head_find_heads"  # the Head view's button: Token focus on the query and key of a cell

# --- Head similarity at length (issue 52) ------------------------------------------------------------
COST_ACCEPTED = "_cost_accepted"  # what the user accepted to wait for in this session (cost_prompt.accepted)

# --- the Head view's *Links* section (head_links_view; issue 52: what the Whole text page showed) -----------
