"""docs/using.md's list of the pages is made from the features' records (`catalogue.pages_table`): every page is in
it, under its section, in the navigation's order, with its own summary; a record changed without the docs fails here."""

from __future__ import annotations

import re

from mha_viz import catalogue
from tests.helpers import ROOT

BLOCK = re.compile(r"<!-- pages:[^>]*-->\n(.*?)\n<!-- /pages -->", re.S)


def test_the_docs_hold_the_records_list_of_pages():
    found = BLOCK.findall((ROOT / "docs/using.md").read_text())
    assert found == [catalogue.pages_table()], (
        "docs/using.md's list of pages differs from the features' records: paste the output of "
        "`python -c 'from mha_viz import catalogue; print(catalogue.pages_table())'` between its markers")


def test_every_page_is_listed_once_with_a_summary_of_its_own():
    table = catalogue.pages_table()
    summaries = [f.summary for f in catalogue.features()]
    assert all(s and s[0].isupper() and s.endswith(".") for s in summaries)
    assert len(set(summaries)) == len(summaries)
    for f in catalogue.features():
        assert table.count(f"(`/{f.id}`)") == 1, f.id
    sections = [line[4:-2] for line in table.splitlines() if line.startswith("- **")]
    assert sections == list(catalogue.SECTIONS)
