"""The page *Compare texts or models*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.metrics.measures import METRICS

CMP_METRIC = "cmp_metric"  # models of different shapes: the metric compared by depth
CMP_RESCALE = "cmp_rescale"

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why),
# and its other keys that the kit's keys held
CMP_MODE = "cmp_mode"
CMP_TEXT_B = "cmp_text_b"
CMP_MODEL_B = "cmp_model_b"
CMP_OTHER_B = "cmp_other_b"
CMP_LOCAL_B = "cmp_local_b"
CMP_PAIR = "cmp_pair"  # a minimal-pair example: sets the sidebar's text and sentence B

CONTROLS = (vp.flag(CMP_RESCALE), vp.choice(CMP_METRIC, tuple(METRICS), default=next(iter(METRICS))),
    *vp.local("the link's own parameters: run B (compare, text_b, model_b, mha_b)",
              CMP_MODE, CMP_TEXT_B, CMP_MODEL_B, CMP_OTHER_B, CMP_LOCAL_B),
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

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn; a preset that acts once
# (its on_change sets the texts, which are kept)
NOT_KEPT = frozenset({CMP_PAIR, CMP_LAYER, CMP_HEAD})
