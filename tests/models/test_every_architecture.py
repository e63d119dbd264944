"""Every text architecture of the installed transformers with a causal-LM or masked-LM class
(`tests/models/every_architecture.py`), built as a tiny random-init model and loaded as a user's folder: what mha-viz
finds is the row of docs/using.md's table for it (so the table cannot go stale), a loaded model's capture equals its
own eager forward within 1e-5 on every layer that gives probabilities, every per-head feature that reads the heads'
outputs runs with its property or says why not (`head_features`), and a refusal says why in plain words. A type
that fails through a bug of the loader (`every_architecture.BUGS`: a raw exception out of `load_model`, layers with
probabilities left out of the capture) is expected to fail, strictly: fixed, it fails until its entry goes."""

from __future__ import annotations

import pytest

from tests.models import every_architecture as ea
from tests.models import head_features

pytestmark = pytest.mark.model

EXCEPTION_TEXT = ("Traceback", "Error", "Exception", "has no attribute", "NoneType")


def test_the_table_has_a_row_for_every_type_and_leaves_out_only_the_skipped():
    """One row per surveyed type, in order; every type skipped is still one transformers has, and is not surveyed."""
    everything = ea.every_type()
    assert list(ea.documented()) == ea.surveyed(), (
        "docs/using.md's architectures table is not the survey's: run `python -m tests.models.every_architecture`")
    assert set(ea.SKIPPED) <= set(everything) and not set(ea.SKIPPED) & set(ea.documented())
    assert set(ea.BUGS) <= set(ea.surveyed())


def _expected(model_type: str):
    if model_type not in ea.BUGS:
        return model_type
    raises, bug = ea.BUGS[model_type]
    return pytest.param(model_type, marks=pytest.mark.xfail(strict=True, raises=raises, reason=f"bug: {bug}"))


@pytest.mark.parametrize("model_type", [_expected(t) for t in ea.surveyed()])
def test_what_mha_viz_finds_is_the_documented_row(model_type, tmp_path):
    found = ea.survey(model_type, ea.build(model_type, tmp_path))
    assert ea.shape(found.row) == ea.shape(ea.documented()[model_type]), (
        f"{model_type}: docs/using.md says {ea.documented()[model_type]}, the loader now gives {found.row}: run "
        "`python -m tests.models.every_architecture`")
    if found.error is not None:  # a raw exception out of load_model: a bug (BUGS)
        raise found.error
    if found.message is not None:  # refused
        assert not [t for t in EXCEPTION_TEXT if t in found.message], found.message
        return
    if found.missed:
        raise ea.LayersNotCaptured(f"{model_type}: layers {found.missed} give probabilities the capture leaves out")
    assert found.gap <= ea.TOLERANCE, f"{model_type}: the capture is {found.gap:.2g} from the model's own forward"
    head_features.features(found.model, ea.TEXT)  # the analysis, and every per-head feature or its stated reason
