"""The page *Queries and keys*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp
from mha_viz.export.shared_controls import WALK_START
from mha_viz.views import qk

QK_I = "qk_i"  # query and key positions of the neuron view
QK_J = "qk_j"
QK_METHOD = "qk_method"
QK_TOP = "qk_top"
QK_TRANSLATE = "qk_translate"

CONTROLS = (
    vp.number(QK_I, 0, upto=vp.TOKENS, default=lambda cur: min(vp.tokens_of(cur), 64) // 2),
    vp.number(QK_J, 0, upto=vp.TOKENS, default=0),
    vp.choice(QK_METHOD, qk.METHODS, default=qk.METHODS[0]),
    vp.flag(QK_TRANSLATE),
    vp.number(QK_TOP, 1, 10, default=lambda cur: min(3, vp.tokens_of(cur))),
    WALK_START,
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
QK_LAYER = "qk_layer"
QK_HEAD = "qk_head"
QK_MAP = "qk_map"  # the query/key map's selection event (a click on a query sets QK_I)
QK_NEURON = "qk_neuron"

# its inputs drawn without persist_state=KEEP: the shared head's pickers, and the positions of the run on screen,
# clamped to each new run and meant to start afresh with it
NOT_KEPT = vp.head_pickers(QK_LAYER, QK_HEAD) | {QK_I, QK_J}
