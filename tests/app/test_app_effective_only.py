"""A model of state-space or recurrent layers alone in the app (issue 88): random-init Mamba-2, Mamba, RWKV and xLSTM
folders, typed as a user's folder, open every page with no exception and no error, and each page's primary button
(where it draws one) answers with a result or a message, as on the bundled models (tests/app/test_app_defaults.py).
The Head view draws a group's weights as the run holds them (|A| with rows normalised:
tests/models/test_effective_only.py), Model facts says what they are, and the pages that need softmax heads (their
queries and keys, their outputs) say so and why."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.ui.kit import keys
from tests.app.helpers import PAGE_IDS, charts, open_folder, open_page
from tests.models.effective_families import save_random

pytestmark = pytest.mark.model
TEXT = "The cat sat on the mat. The dog sat on the log."
NEED_SOFTMAX = {"prediction": "read as effective attention (no softmax)", "qk": "no softmax attention layer",
                "teaching": "no softmax attention layer", "ablation": "read as effective attention (no softmax)",
                "retrieval": "would make it again for every token of every answer"}
SKIPPED = {"corpus"}  # its button reads the bundled corpus (tests/app/test_app_corpus.py)


def _said(at) -> set[str]:
    return {e.value for e in at.error}


@pytest.mark.parametrize("family", ["mamba2", "mamba", "rwkv", "xlstm"])
def test_every_page_opens_and_answers_on_a_model_of_state_space_layers_alone(tmp_path, family):
    at = open_folder(save_random(family, tmp_path / family), TEXT)
    run = at.session_state[keys.CURRENT].run
    assert run.attentions.shape[:2] == (2, 8)
    pressed = []
    for page in PAGE_IDS:
        open_page(at, page)
        assert not at.exception and not _said(at), (page, at.exception, _said(at))
        if page in NEED_SOFTMAX:
            notes = " ".join(x.value for x in [*at.info, *at.warning]).replace("\\", "")
            assert NEED_SOFTMAX[page] in notes, (page, notes)
        key = next((b.key for b in at.main.button if b.key and not b.disabled and b.proto.type == "primary"), None)
        if key is None or page in SKIPPED:
            continue
        at.button(key=key).click().run()
        assert not at.exception and not _said(at), (page, key, at.exception, _said(at))
        pressed.append(page)
    assert "generate" in pressed, pressed
    open_page(at, "model_facts")
    facts = " ".join(str(t.value.to_dict()) for t in at.table)
    assert "effective attention" in facts and "no softmax" in facts


def test_the_head_view_draws_a_groups_weights_as_the_run_holds_them(tmp_path):
    at = open_folder(save_random("mamba2", tmp_path / "mamba2"), TEXT, page="head_view")
    run = at.session_state[keys.CURRENT].run
    drawn = [np.asarray(t["z"], dtype=np.float64) for c in charts(at) for t in c["data"]
             if t.get("type") == "heatmap" and np.shape(t.get("z")) == (run.n, run.n)]
    assert drawn, "no heatmap of the run's tokens"
    assert any(np.allclose(z, run.attentions[layer, head], atol=1e-6)
               for z in drawn for layer in range(2) for head in range(8))


def test_every_page_opens_on_a_long_run_of_mamba2_without_every_heads_array(tmp_path, monkeypatch):
    """A long run of a model of Mamba-2 layers alone (MHA_VIZ_DENSE_MB=0 makes every analysis one): every page opens
    with building every head's array forbidden (`head_rows.forbid_dense`), its rows made again a block at a time."""
    from mha_viz.capture.head_rows import forbid_dense

    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    with forbid_dense():
        at = open_folder(save_random("mamba2", tmp_path / "mamba2"), TEXT)
        run = at.session_state[keys.CURRENT].run
        assert not run.is_dense and run.summary is not None and run.num_heads == 8
        for page in PAGE_IDS:
            open_page(at, page)
            assert not at.exception and not _said(at), (page, at.exception, _said(at))
        assert not run.is_dense
