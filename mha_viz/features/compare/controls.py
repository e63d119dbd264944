"""The page *Compare texts or models*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.export.link_params import MAX_TEXT_CHARS
from mha_viz.metrics.measures import METRICS

TEXTS, MODELS = "texts", "models"  # the modes: two sentences on one model, one sentence on two models
PAIRS = {  # minimal pairs: (A, B)
    "Agreement: are / is": ("The keys to the old wooden cabinet are missing.",
                            "The keys to the old wooden cabinet is missing."),
    "Coreference: tired / wide": ("The animal didn't cross the street because it was too tired.",
                                  "The animal didn't cross the street because it was too wide."),
    "Word order": ("The dog chased the cat across the yard.", "The cat chased the dog across the yard."),
    "Repetition": ("Harry Potter went to Hogwarts.", "Harry Potter went to Hogwarts. Later, Harry Potter went home."),
}
DEFAULT_TEXT_B = PAIRS["Agreement: are / is"][1]

CMP_METRIC = "cmp_metric"  # models of different shapes: the metric compared by depth
CMP_RESCALE = "cmp_rescale"
CMP_MODE = "cmp_mode"  # TEXTS or MODELS
CMP_TEXT_B = "cmp_text_b"  # sentence B (TEXTS)
CMP_B_SPEC = "cmp_b_spec"  # model B as the sidebar names a model (MODELS): what its picker holds, or a link put
CMP_LOCAL_B = "cmp_local_b"  # B computes with our MHA (MODELS)

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why)
CMP_MODEL_B = "cmp_model_b"
CMP_OTHER_B = "cmp_other_b"
CMP_PAIR = "cmp_pair"  # a minimal-pair example: sets the sidebar's text and sentence B

# run B keeps the names links gave it before it was controls: compare, text_b, model_b, mha_b
CONTROLS = (vp.flag(CMP_RESCALE), vp.choice(CMP_METRIC, tuple(METRICS), default=next(iter(METRICS))),
    vp.choice(CMP_MODE, (TEXTS, MODELS), default=TEXTS, param="compare"),
    vp.text(CMP_TEXT_B, MAX_TEXT_CHARS, param="text_b", words="sentence B", default=DEFAULT_TEXT_B,
            only_when=(CMP_MODE, TEXTS)),
    vp.model(CMP_B_SPEC, param="model_b", words="model B", only_when=(CMP_MODE, MODELS)),
    vp.flag(CMP_LOCAL_B, default=None, param="mha_b", states=("ours", "hf"), only_when=(CMP_MODE, MODELS)),
    *vp.local("model B's picker: a bundled model, or a hub id or folder typed (carried as model_b)",
              CMP_MODEL_B, CMP_OTHER_B),
    *vp.local("a preset acts once: it sets the sidebar's text and sentence B", CMP_PAIR),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
CMP_LAYER = "cmp_layer"  # the head shown side by side (a row of run A)
CMP_HEAD = "cmp_head"
CMP_GRID = "cmp_grid"  # the change grid's selection event (a click picks the head)
CMP_DEPTH = "cmp_depth"
CMP_SIDE = "cmp_side"
CMP_TABLE_DF = "cmp_table_df"
DL_CMP = "dl_cmp"
CMP_UNDO = "_cmp_undo"  # (the pair's two texts, the two they replaced): what a minimal pair's Undo puts back
CMP_UNDO_GO = "cmp_undo_go"
CMP_START = "cmp_start"  # the button that starts comparing two long runs head by head, its cost stated

# its inputs drawn without persist_state=KEEP: the shared head's pickers, and a preset that acts once (its on_change
# sets the texts, which are kept)
NOT_KEPT = vp.head_pickers(CMP_LAYER, CMP_HEAD) | {CMP_PAIR}
