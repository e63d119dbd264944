"""The session keys of the page *Generate* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/generate/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.generate import controls as _generate

GEN_MAX_NEW = _generate.GEN_MAX_NEW
GEN_RESCALE = _generate.GEN_RESCALE
GEN_SEED = _generate.GEN_SEED
GEN_STEP = _generate.GEN_STEP
GEN_TEMPERATURE = _generate.GEN_TEMPERATURE
GEN_TOP_K = _generate.GEN_TOP_K
GEN_TOP_P = _generate.GEN_TOP_P
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

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): the pickers of the shared head
# (shared_head.pick_head), set from the kept SEL_LAYER / SEL_HEAD before they are drawn
NOT_KEPT = frozenset({GEN_LAYER, GEN_HEAD})
