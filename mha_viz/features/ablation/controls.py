"""The page *Switch heads off*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import shared_controls
from mha_viz.export import view_params as vp

ABLATE_MODE = "ablate_mode"
ABLATION_OTHER = "ablation_other"
IMP_SOURCE = "imp_source"
THIS_TEXT, SAMPLE = "this text", "a bundled sample paragraph"  # IMP_SOURCE's choices: what importance is scored on
OTHER_SENTENCE = "A cat is resting on a rug."  # ABLATION_OTHER's default

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why),
# and its other keys that the kit's keys held
HEADS_LAYER_PICK = "heads_layer_pick"
IMP_K = "imp_k"

CONTROLS = (
    vp.choice(ABLATE_MODE, ("zeroed (ξ = 0)", "replaced by their mean output on this text"),
              default="zeroed (ξ = 0)"),
    vp.choice(ABLATION_OTHER, default=OTHER_SENTENCE),
    vp.choice(IMP_SOURCE, (THIS_TEXT, SAMPLE), default=THIS_TEXT),
    vp.picks(shared_controls.HEADS_OFF, text=True, default=[]),
    *vp.local("a layer whose heads a button switches off", HEADS_LAYER_PICK),
    *vp.local("the importance's k waits for the importance", IMP_K),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
IMPORTANCE_DONE = "_imp_done"  # the AnalysisKeys whose importance was asked for
PRUNING_DONE = "_prune_done"
IMP_OPEN = "imp_open"  # the box *Which heads matter* (`boxes.lazy_box`): open now, and as last left
IMP_WAS_OPEN = "_imp_was_open"
RERUN_SECONDS = "_rerun_s"  # {the text's AnalysisKey: seconds its last pass with heads off took}
DL_IMP = "dl_imp"
DL_PRUNE = "dl_prune"
HEADS_ALL_ON = "heads_all_on"
HEADS_GRID_PREFIX = "heads_grid_"
HEADS_LAYER_OFF = "heads_layer_off"
IMP_APPLY = "imp_apply"
IMP_GO = "imp_go"
IMP_GRID = "imp_grid"
PRUNE_FIG = "prune_fig"
PRUNE_GO = "prune_go"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py)
NOT_KEPT = frozenset({
    HEADS_GRID_PREFIX,  # the on/off grid, drawn under a new key whenever the app changes it (HEADS_ON keeps the heads)
    HEADS_LAYER_PICK, IMP_K,  # a layer of the run on screen and the importance's k, clamped to each new run
})
