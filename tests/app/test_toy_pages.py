"""toy-induction in the app through AppTest: every page renders for it. (The app starts on
MiniLM, hence the model marker.)"""

from __future__ import annotations

import pytest

from tests.app.helpers import app_page_ids, open_page, shown, start_app

pytestmark = pytest.mark.model
PAGES = app_page_ids()  # every page of the app


def test_every_page_renders_for_the_toy():
    assert len(PAGES) >= 7 and "model_facts" in PAGES
    at = start_app()
    at.selectbox(key="model_choice").set_value("toy-induction").run()
    at.text_area(key="text").input("a b c d a b c d").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    for page in PAGES:
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
    facts = dict(zip(at.table[0].value["fact"], at.table[0].value["value"]))
    assert shown(facts["model"]) == "toy-induction"
    assert facts["layers"] == "2" and facts["attention heads per layer"] == "4"
    assert facts["attention implementation"].startswith("ours")
