"""GPT-OSS's learned sinks on the model view: a grid of each head's share given to no token, equal
to 1 − the row sums of the captured attention; a model whose rows sum to 1 shows none."""

from __future__ import annotations

import numpy as np

from mha_viz.ui.kit import keys
from mha_viz.ui.shell.sidebar import OTHER
from tests.app.helpers import open_with_text
from tests.models.architectures_2026 import build

TEXT = "The cat sat on the mat. The dog sat on the log."


def test_the_model_view_shows_each_heads_share_given_to_its_sink(tmp_path):
    folder = build("gpt_oss", tmp_path / "gpt_oss")
    at = open_with_text("model_view", TEXT)
    assert "Learned sinks" not in [h.value for h in at.subheader]  # MiniLM's rows sum to 1
    at.selectbox(key="model_choice").set_value(OTHER).run()
    at.text_input(key="model_other").input(folder).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Learned sinks" in [h.value for h in at.subheader]
    run = at.session_state[keys.CURRENT].run
    share = 1 - run.attentions.sum(-1, dtype=np.float64).mean(-1)  # (L, H), computed here
    caption = next(c.value for c in at.caption if "learned sink logit" in c.value)
    assert f"highest {share.max():.3f}" in caption and f"Mean over heads {share.mean():.3f}" in caption
