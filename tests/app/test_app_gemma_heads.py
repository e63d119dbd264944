"""Gemma 4 and Gemma 3n in the app (issue 89), random-init folders loaded as a user's model: every page opens with
no traceback and no error. A Gemma 4 whose global layers' heads are larger than its sliding layers' (it was refused
at load) shows every head's attention and every page that reads each head's output (stacked at the largest size);
Gemma 3n, whose later layers reuse an earlier layer's keys and values, shows every page."""

from __future__ import annotations

import pytest

from mha_viz.ui.kit import keys
from tests.app.helpers import app_page_ids, open_page
from tests.app.helpers import open_folder as _open
from tests.helpers import save_peaked
from tests.models import architectures_2026 as arch

pytestmark = pytest.mark.model
TEXT = "The cat sat on the mat. The dog sat on the log, and the cat ran off."


def _gemma4(out) -> str:
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig
    config = Gemma4TextConfig(**arch.common(
        sliding_window=arch.WINDOW, layer_types=["sliding_attention"] * 3 + ["full_attention"],
        per_layer_config={"03": {"head_dim": 32}}, vocab_size_per_layer_input=400, hidden_size_per_layer_input=8))
    return save_peaked(Gemma4ForCausalLM, config, out, sharpened=arch.SHARPENED, scale=2.0, norm=2.0)


@pytest.mark.parametrize("name", ["gemma4", "gemma3n"])
def test_every_page_opens(name, tmp_path):
    folder = _gemma4(tmp_path / name) if name == "gemma4" else arch.build(name, tmp_path / name)
    at = _open(folder, TEXT)
    run = at.session_state[keys.CURRENT].run
    assert run.num_layers == 4 and run.n > 10
    said = []
    for page in app_page_ids():
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
        said += [m.value for m in (*at.info, *at.warning)]
    assert run.head_outputs is not None  # Gemma 4's at its global layers' size, the sliding layers' padded
    assert not any("head_dim" in s or "cannot be read" in s for s in said), said
