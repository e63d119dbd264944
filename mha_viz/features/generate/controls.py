"""The page *Generate*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

GEN_MAX_NEW = "gen_max_new"
GEN_RESCALE = "gen_rescale"
GEN_SEED = "gen_seed"
GEN_STEP = "gen_step"  # 1-based step of the slider
GEN_TEMPERATURE = "gen_temperature"
GEN_TOP_K = "gen_top_k"
GEN_TOP_P = "gen_top_p"
S2S_STEP = "s2s_step"

CONTROLS = (
    vp.number(GEN_MAX_NEW, 1, 1024, default=16),
    vp.number(GEN_TEMPERATURE, 0, 5, integer=False, default=0.0),
    vp.number(GEN_TOP_K, 1, 1_000_000, default=50),
    vp.number(GEN_TOP_P, 0.01, 1, integer=False, default=1.0),
    vp.number(GEN_SEED, 0, 2**31 - 1, default=0),
    vp.number(GEN_STEP, 1, 1_000_000),
    vp.flag(GEN_RESCALE),
    vp.number(S2S_STEP, 1, 1_000_000, default=1),  # an encoder–decoder's steps
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
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

# its inputs drawn without persist_state=KEEP: the shared head's pickers, and an encoder–decoder's step, of the
# generation on screen
NOT_KEPT = vp.head_pickers(GEN_LAYER, GEN_HEAD) | {S2S_STEP}
