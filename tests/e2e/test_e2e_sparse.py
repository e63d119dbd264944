"""A sparse-attention model in a real browser (issue 89): a researcher types the folder of a random-init
DeepSeek-V3.2 (`indexed_attention`: each query's softmax over the keys its indexer picks) as a user's model. Model
facts draws what the indexer keeps (a row a layer, every head in an expander), the Head view marks the picks with
orange squares and says what they are; nothing is cut off or drawn over anything (readable.check), and no error
shows."""

from __future__ import annotations

import pytest

from tests.models.architectures_2026 import build

from . import readable

pytestmark = pytest.mark.e2e

TEXT = "The cat sat on the mat. The dog sat on the log, and the cat ran off."


def test_a_sparse_model_shows_what_its_indexer_keeps(shared_app, tmp_path):
    app = shared_app
    folder = build("deepseek_v32", tmp_path)
    app.choose("Model", "Other: hub id or folder…", scope="[data-testid=stSidebar]")
    box = app.page.locator("[data-testid=stSidebar]").get_by_label("Hub id or local folder")
    app.rerun(lambda: (box.fill(folder), box.press("Enter")))
    app.set_text(TEXT)
    app.goto("Model facts")
    main = app.page.locator("[data-testid=stMain]")
    assert main.get_by_text("Sparse attention: what the indexer keeps", exact=True).count() == 1
    assert main.get_by_text("kept mass", exact=False).count() >= 1
    app.shot("model-facts")
    assert readable.check(app, "Model facts")[1] == []
    app.goto("Head view")
    captions = main.locator("[data-testid=stCaptionContainer]").all_inner_texts()
    assert any("keys this layer's indexer picked" in c for c in captions), captions
    assert app.chart_title(0).startswith("Layer 0, head 0")
    app.shot("head-view")
    assert readable.check(app, "Head view")[1] == []
    app.assert_clean()
