"""A class on a server just started (issue 91), over Streamlit's own websocket protocol (`class_client`, no browser):
N students connect at the same moment to a server whose script has never run, each lands, types a sentence of its
own (one word in it that is one token of MiniLM's and no other student's) and opens the Head view. Each must see its
own word among the Head view's token labels and no other student's, with no error on any page nor in the server's
log. N is 30 in `make test` (MHA_VIZ_E2E_CLASS raises it; `benchmarks/class.py` times 30, 100 and 300)."""

from __future__ import annotations

import os

import mha_viz

from .class_client import class_of, marker_words, sentence_of
from .conftest import ARTIFACTS, start_server

STUDENTS = int(os.environ.get("MHA_VIZ_E2E_CLASS", "30"))


def test_a_class_at_once_each_sees_its_own_sentence():
    words = marker_words(mha_viz.load_model("minilm").tokenizer, STUDENTS)
    log = ARTIFACTS / "class.log"
    with start_server(log) as base:
        seen = class_of(base, [sentence_of(w) for w in words])
    problems = [(s.sentence, s.errors) for s in seen if s.errors]
    assert not problems, problems
    for word, student in zip(words, seen):
        shown = student.tokens()
        assert word in shown, (student.sentence, sorted(shown)[:40])
        assert not (shown & set(words)) - {word}, (student.sentence, sorted((shown & set(words)) - {word}))
        assert 0 < student.landed <= student.typed <= student.done
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and " ERROR " not in text, text[-3000:]
