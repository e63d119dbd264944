"""The lists of supported models come from the registry (`mha_viz_models.families.FAMILIES`): the message
of a refused model names every family's models, and docs/using.md and docs/architecture.md hold
the table `family_table()` makes."""

from __future__ import annotations

import re

import pytest

from mha_viz_models.architectures import SUPPORTED
from mha_viz_models.families import FAMILIES, family_table, supported_models
from tests.helpers import ROOT

BLOCK = re.compile(r"<!-- families:[^>]*-->\n(.*?)\n<!-- /families -->", re.S)


@pytest.mark.parametrize("doc", ["docs/using.md", "docs/architecture.md"])
def test_the_docs_hold_the_registrys_table(doc):
    found = BLOCK.findall((ROOT / doc).read_text())
    assert found == [family_table()], (
        f"{doc}'s family table differs from the registry's: paste the output of "
        "`python -c 'from mha_viz_models.families import family_table; print(family_table())'` between its markers")


def test_every_family_is_named_in_the_messages_and_the_table():
    named = [fam for fam in FAMILIES.values() if fam.names]
    assert {fam.tag for fam in named} >= {"bert", "gpt2", "llama", "deberta", "mla", "t5", "bart"}
    for fam in named:
        for model in fam.names.split(", "):
            assert model in supported_models() and model in SUPPORTED and model in family_table(), model
    assert f"`{named[0].tag}`" in family_table()
