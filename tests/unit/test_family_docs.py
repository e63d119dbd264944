"""The lists of supported models come from the registry (`mha_viz_models.families.builtin.FAMILIES`): the message
of a refused model names every family's models, docs/using.md and docs/architecture.md hold
the table `family_table()` makes, every list of families in them is the registry's, and
docs/architecture.md says how to add a family."""

from __future__ import annotations

import re

import pytest

from mha_viz_models.families.architectures import SUPPORTED
from mha_viz_models.families.builtin import FAMILIES, family_table, supported_models
from tests.helpers import ROOT

BLOCK = re.compile(r"<!-- families:[^>]*-->\n(.*?)\n<!-- /families -->", re.S)


@pytest.mark.parametrize("doc", ["docs/using.md", "docs/architecture.md"])
def test_the_docs_hold_the_registrys_table(doc):
    found = BLOCK.findall((ROOT / doc).read_text())
    assert found == [family_table()], (
        f"{doc}'s family table differs from the registry's: paste the output of "
        "`python -c 'from mha_viz_models.families.builtin import family_table; print(family_table())'` "
        "between its markers")


def test_every_family_is_named_in_the_messages_and_the_table():
    named = [fam for fam in FAMILIES.values() if fam.names]
    assert {fam.tag for fam in named} >= {"bert", "gpt2", "llama", "deberta", "mla", "t5", "bart"}
    for fam in named:
        for model in fam.names.split(", "):
            assert model in supported_models() and model in SUPPORTED and model in family_table(), model
    assert f"`{named[0].tag}`" in family_table()


WHOLE_BLOCK = re.compile(r"<!-- families:[^>]*-->\n.*?\n<!-- /families -->", re.S)
TAG = re.compile(r"`([a-z0-9_]+)`")


def _named_tags() -> list[str]:
    return [tag for tag, fam in FAMILIES.items() if fam.names]


@pytest.mark.parametrize("doc", ["docs/using.md", "docs/architecture.md"])
def test_every_list_of_families_in_the_docs_is_the_registrys(doc):
    """The table's rows are the registry's named families, in order, each with its models (read
    off the Markdown, not through `family_table`); and any other paragraph that names two or more
    families by tag names every one, in the registry's order (no list left behind when one is added)."""
    text = (ROOT / doc).read_text()
    (table,) = BLOCK.findall(text)
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert [row[0] for row in rows] == [f"`{tag}`" for tag in _named_tags()]
    assert [row[1] for row in rows] == [FAMILIES[tag].names for tag in _named_tags()]
    for paragraph in re.split(r"\n\s*\n", WHOLE_BLOCK.sub("", text)):
        named = [tag for tag in TAG.findall(paragraph) if tag in FAMILIES]
        if len(named) >= 2:
            assert named in (list(FAMILIES), _named_tags()), f"{doc}: a list of families not the registry's: {named}"


def test_the_architecture_page_says_how_to_add_a_family():
    """Its checklist names the files a family needs, each of which exists."""
    text = (ROOT / "docs/architecture.md").read_text()
    section = text[text.index("## Adding a family"):]
    for path in ("models/mha_viz_models/families/adapters.py", "models/mha_viz_models/families/builtin.py",
                 "tests/models/test_family_features.py", "tests/unit/test_family_docs.py"):
        assert path in section and (ROOT / path).exists(), path
    assert "family_table()" in section and "register(Family(" in section
