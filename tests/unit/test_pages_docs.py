"""docs/using.md's list of the pages is made from the features' records (`catalogue.pages_table`): every page is in
it, under its section, in the navigation's order, with its own summary; docs/architecture.md's table of the features
too (`catalogue.features_table`: each folder's modules, the controls links carry, the public figures). A record or a
folder changed without the docs fails here."""

from __future__ import annotations

import re

from mha_viz import catalogue
from tests.helpers import ROOT

BLOCK = re.compile(r"<!-- pages:[^>]*-->\n(.*?)\n<!-- /pages -->", re.S)
FEATURES = re.compile(r"<!-- features:[^>]*-->\n(.*?)\n<!-- /features -->", re.S)


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


def test_the_architecture_holds_the_records_table_of_features():
    found = FEATURES.findall((ROOT / "docs/architecture.md").read_text())
    assert found == [catalogue.features_table()], (
        "docs/architecture.md's table of features differs from the records and folders: paste the output of "
        "`python -c 'from mha_viz import catalogue; print(catalogue.features_table())'` between its markers")


def test_the_table_of_features_names_each_folders_modules_and_carried_controls():
    rows = {line.split(" | ")[0][2:]: line for line in catalogue.features_table().splitlines()[2:]}
    assert set(rows) == {f"`features/{f.id}/`" for f in catalogue.features()}
    head_view = rows["`features/head_view/`"]
    assert "`page.py`" in head_view and "`subset.py`" in head_view and "`__init__.py`" not in head_view
    assert "`links_skip_first`" in head_view  # a carried control
    assert "`links_query`" not in rows["`features/head_view/`"].split(" | ")[4]  # a local one is not carried
    assert rows["`features/task/`"].endswith("| `task_grid` |")
