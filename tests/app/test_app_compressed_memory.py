"""DeepSeek-V4 in the app (issue 89), a random-init folder loaded as a user's model: every page opens with no
traceback and no error; the Head view of a compressed layer shows its memory entries as columns of their own (each
labelled by the tokens it compresses) with the split of every head's rows; the Model view shows each head's share on
the entries and the sink's apart; Model facts has the table; hiding tokens says why the entries are not shown."""

from __future__ import annotations

import pytest

from mha_viz.drawing import memory_columns as memory_figures
from mha_viz.ui.kit import keys, memory_view
from tests.app.helpers import app_page_ids, open_page
from tests.app.helpers import open_folder as _open
from tests.models import architectures_2026 as arch

pytestmark = pytest.mark.model


def test_every_page_opens_and_the_entries_show(tmp_path):
    at = _open(arch.build_deepseek_v4(tmp_path / "v4"), arch.V4_TEXT)
    run = at.session_state[keys.CURRENT].run
    assert run.num_layers == 4 and run.memory is not None
    for page in app_page_ids():
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
    open_page(at, "model_view")
    assert "Compressed memory" in [s.value for s in at.subheader]
    assert "Learned sinks" in [s.value for s in at.subheader]  # the sink's share apart from the entries'
    open_page(at, "model_facts")
    assert "Compressed memory: where each row goes" in [s.value for s in at.subheader]
    open_page(at, "head_view")  # on the head Compare showed (the one that changed most: the shared head)
    at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(0).run()
    assert memory_figures.CAPTION not in [c.value for c in at.caption]  # layer 0 slides: no entries
    at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(1).run()
    assert not at.exception and not at.error
    assert memory_figures.CAPTION in [c.value for c in at.caption]
    assert any("less what the head's learned sink and the compressed memory entries took" in c.value
               for c in at.caption)  # not "each row sums to 1"
    at.sidebar.checkbox(key=keys.HIDE_FIRST).check().run()  # the rows renormalised over the kept tokens
    assert not at.exception and not at.error
    assert memory_figures.CAPTION not in [c.value for c in at.caption]
    assert memory_view.NOT_HELD in [i.value for i in at.info]
