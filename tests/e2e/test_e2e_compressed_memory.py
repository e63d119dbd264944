"""DeepSeek-V4's compressed memory in a real browser (issue 89): a researcher types the folder of a random-init
DeepSeek-V4 as a user's model. The Head view of a compressed sparse layer draws the head's rows over its memory
entries, each labelled by the tokens it compresses, and every head's split among tokens, entries and sink; the Model
view has the grid of each head's share on the entries; Model facts the table. Nothing is cut off or drawn over
anything (readable.check), and no error shows."""

from __future__ import annotations

import pytest

from tests.models import architectures_2026 as arch

from . import readable

pytestmark = pytest.mark.e2e


def test_a_compressed_memory_model_shows_its_entries(shared_app, tmp_path):
    app = shared_app
    folder = arch.build_deepseek_v4(tmp_path)
    app.choose("Model", "Other: hub id or folder…", scope="[data-testid=stSidebar]")
    box = app.page.locator("[data-testid=stSidebar]").get_by_label("Hub id or local folder")
    app.rerun(lambda: (box.fill(folder), box.press("Enter")))
    app.set_text(arch.V4_TEXT)
    main = app.page.locator("[data-testid=stMain]")
    app.goto("Model view")
    assert main.get_by_text("Compressed memory", exact=True).count() == 1
    assert app.titled("Attention given to compressed memory entries") is not None
    app.goto("Model facts")
    assert main.get_by_text("Compressed memory: where each row goes", exact=True).count() == 1
    app.shot("model-facts")
    assert readable.check(app, "Model facts")[1] == []
    app.goto("Head view")
    app.choose("Layer", "1", scope="[data-testid=stMain]")
    index = next((i for i in range(app.charts().count())
                  if app.chart_title(i).startswith("Layer 1, head 0: its compressed sparse memory's")), None)
    assert index is not None, [app.chart_title(i) for i in range(app.charts().count())]
    labels = app.ticks("x", index)  # entry w compresses tokens 4(w − 1) … 4w + 3
    assert labels[0] == "▤ 0–3" and labels[1] == "▤ 0–7", labels
    assert app.titled("Layer 1: where each head's rows go") is not None
    captions = main.locator("[data-testid=stCaptionContainer]").all_inner_texts()
    assert any("a compressed memory entry, made from tokens" in c for c in captions), captions
    app.shot("head-view")
    assert readable.check(app, "Head view")[1] == []
    app.assert_clean()
