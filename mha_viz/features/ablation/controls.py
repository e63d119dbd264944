"""The page *Switch heads off*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import view_params as vp

ABLATE_MODE = "ablate_mode"
ABLATION_OTHER = "ablation_other"
IMP_SOURCE = "imp_source"
THIS_TEXT, SAMPLE = "this text", "a bundled sample paragraph"  # IMP_SOURCE's choices: what importance is scored on
HEADS_OFF = "heads_off"  # the heads switched off, by label: a control whose value is no widget's
OTHER_SENTENCE = "A cat is resting on a rug."  # ABLATION_OTHER's default

CONTROLS = (
    vp.choice(ABLATE_MODE, ("zeroed (ξ = 0)", "replaced by their mean output on this text"),
              default="zeroed (ξ = 0)"),
    vp.choice(ABLATION_OTHER, default=OTHER_SENTENCE),
    vp.choice(IMP_SOURCE, (THIS_TEXT, SAMPLE), default=THIS_TEXT),
    vp.picks(HEADS_OFF, text=True, default=[]),
)
