"""The capture budget (MHA_VIZ_MAX_CAPTURE_MB) is checked in one place (mha_viz.budget.capture_budget): an input
too big for it is refused before anything runs, from every path (an analysis's shortfall, a generation, an
encoder–decoder capture, a corpus batch), with an InputError that says it in the same words — the need, the excess
and the limit worked out by hand here."""

from __future__ import annotations

import ast

import pytest
import torch

import mha_viz
from mha_viz import corpus, settings
from mha_viz.budget import memory
from mha_viz.capture.grown_rows import recorded_bytes
from tests.helpers import ROOT, capture_budget_of

BUDGET = 1000  # bytes: less than any of these inputs holds
TEXT = "the cat sat on the mat and the dog sat on the log"
TARGET = "A quick brown fox."


@pytest.fixture
def tight(monkeypatch):
    """The deployment's settings with a capture budget of BUDGET bytes."""
    capture_budget_of(monkeypatch, BUDGET)


@pytest.fixture(scope="module")
def t5(t5_dir):
    return mha_viz.load_model(str(t5_dir), device="cpu")


def _over(need: int) -> str:
    """What every refusal says a need of `need` bytes would hold."""
    size = settings.size_text
    return f"{size(need)} of attention, {size(need - BUDGET)} more than the limit here ({size(BUDGET)}, " \
           "MHA_VIZ_MAX_CAPTURE_MB)"


def _refused(run, spy_on, method: str, monkeypatch) -> str:
    """The message of the InputError `run()` raises, after checking that `spy_on.method` never ran."""
    calls = []
    real = getattr(spy_on, method)
    monkeypatch.setattr(spy_on, method, lambda *a, **k: calls.append(1) or real(*a, **k))
    with pytest.raises(mha_viz.InputError) as caught:
        run()
    assert not calls  # refused before anything ran
    return str(caught.value)


def test_an_analysis_says_it_in_the_same_words(tiny_gpt2, tight):
    n = mha_viz.tokenize(tiny_gpt2, TEXT).n
    need = 4 * tiny_gpt2.num_layers * tiny_gpt2.num_heads * n * n
    room = memory.room("cpu", read=lambda _place: 2**40)  # the host has plenty: only the setting is short
    assert room.capture == BUDGET
    assert memory.shortfall(memory.analysis_need(tiny_gpt2, n), room) == _over(need)


def test_a_generation_is_refused_in_the_same_words(tiny_gpt2, tight, monkeypatch):
    prompt = mha_viz.tokenize(tiny_gpt2, TEXT).n
    # every head's array would not fit: the generation goes long, and its new tokens' rows do not fit either
    need = recorded_bytes(tiny_gpt2.num_layers, tiny_gpt2.num_heads, prompt, 8)
    said = _refused(lambda: mha_viz.generate(tiny_gpt2, TEXT, max_new_tokens=8), tiny_gpt2.hf_model, "forward",
                    monkeypatch)
    assert f"row of 8 new tokens after a {prompt}-token prompt would hold {_over(need)}: " in said


def test_an_encoder_decoder_capture_is_refused_in_the_same_words(t5, tight, monkeypatch):
    s = mha_viz.tokenize(t5, TEXT).n
    t = 1 + len(t5.tokenizer(text_target=TARGET)["input_ids"])  # the decoder's start token, then the target's
    L, H, Ld, Hd = t5.num_layers, t5.num_heads, t5.decoder_layers, t5.decoder_heads
    need = 4 * (L * H * s * s + Ld * Hd * t * t + Ld * Hd * t * s)
    said = _refused(lambda: mha_viz.analyze(t5, TEXT, TARGET), type(t5), "capture_seq2seq", monkeypatch)
    assert f"over {s} source and {t} target tokens would hold {_over(need)}: shorten the texts" in said


def test_a_corpus_document_is_refused_in_the_same_words(tiny_gpt2, tight, monkeypatch):
    n = mha_viz.tokenize(tiny_gpt2, TEXT).n
    need = 2 * 4 * tiny_gpt2.num_layers * tiny_gpt2.num_heads * n * n  # the batch's attention and the document's copy
    said = _refused(lambda: corpus.capture_runs(tiny_gpt2, [TEXT]), tiny_gpt2.hf_model, "forward", monkeypatch)
    assert f"One document of {n} tokens on {tiny_gpt2.name} would hold {_over(need)}: lower the tokens" in said


def test_a_corpus_batch_is_cut_where_the_budget_says(tiny_gpt2, monkeypatch):
    """A budget of exactly two documents' attention: a batch of four equal documents runs as two captures."""
    n = mha_viz.tokenize(tiny_gpt2, TEXT).n
    two = 2 * 4 * tiny_gpt2.num_layers * 2 * tiny_gpt2.num_heads * n * n
    capture_budget_of(monkeypatch, two)
    shapes = []
    capture = tiny_gpt2.capture
    monkeypatch.setattr(tiny_gpt2, "capture", lambda ids, **k: shapes.append(tuple(ids.shape)) or capture(ids, **k))
    with torch.no_grad():
        runs = corpus.capture_runs(tiny_gpt2, [TEXT] * 4)
    assert shapes == [(2, n), (2, n)] and len(runs) == 4


def test_only_the_one_place_reads_the_setting():
    """The setting's bytes (`max_capture_bytes`) are read by mha_viz/budget/capture_budget.py alone, the
    UI included: every other module asks it."""
    readers = []
    for path in sorted((ROOT / "mha_viz").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "max_capture_bytes":
                readers.append(rel)
    assert readers == ["mha_viz/budget/capture_budget.py"]
