"""The Generate page on a long generation (MHA_VIZ_DENSE_MB=0: every generation keeps each new token's rows and
one scan, never every head's array): every step's four views draw without an error while building every
head's array is forbidden (`forbid_dense`), and what they show equals a dense generation of the same
prompt (toy-induction: "k d m x b f k d m" continues "x b f"). The app starts on MiniLM, hence the marker."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.capture import head_rows
from mha_viz.features.generate import controls as generate_keys
from mha_viz.features.generate import figures as gfig
from tests.app.helpers import generation_figures as _figures
from tests.app.helpers import on_generate as _on_generate
from tests.app.helpers import run_generation as _generate

pytestmark = pytest.mark.model
PROMPT, NEW = "k d m x b f k d m", 3


def test_every_step_of_a_long_generation_draws_from_its_rows(monkeypatch):
    dense = mha_viz.generate(mha_viz.load_model("toy-induction", device="cpu"), PROMPT, NEW, dense=True)
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    with head_rows.forbid_dense():
        at = _generate(_on_generate(PROMPT), NEW)
        gen = at.session_state[generate_keys.GEN_LAST][1]
        assert not gen.run.is_dense and gen.new_tokens == dense.new_tokens == ["x", "b", "f"]
        P = gen.num_prompt_tokens
        for layer, head in ((0, 0), (1, 2)):
            at.selectbox(key=generate_keys.GEN_LAYER).set_value(layer).run()
            at.selectbox(key=generate_keys.GEN_HEAD).set_value(head).run()
            for step in range(1, NEW + 1):
                at.slider(key=generate_keys.GEN_STEP).set_value(step).run()
                assert not (at.exception or at.error), (layer, head, step, at.exception, at.error)
                fig, q = _figures(at), gfig.query_row(P, step - 1)
                want = dense.run.attentions[layer]
                np.testing.assert_allclose(np.array(fig["heads"]["data"][0]["z"], float), want[:, q, :q + 1],
                                           atol=1e-5)
                np.testing.assert_allclose(np.array(fig["matrix"]["data"][0]["z"], float), want[head], atol=1e-5)
                masses = gfig.step_masses(want[head], P, NEW)
                for trace, name in zip(fig["lines"]["data"], ("prompt", "generated", "first")):
                    np.testing.assert_allclose(trace["y"], masses[name], atol=1e-5)
        assert not gen.run.is_dense
