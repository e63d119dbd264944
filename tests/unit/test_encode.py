"""`mha_viz.text.encode`: sessions tokenizing at once on one shared fast tokenizer each get their own
call's result. Without the lock, a truncated call and a whole one interleave their settings (the
Rust tokenizer holds them): some whole texts come back cut and some cut ones whole."""

from __future__ import annotations

import threading

from mha_viz.text.encode import encode, lock
from tests.helpers import byte_bpe_tokenizer

TEXT = "The cat sat on the mat, and the dog sat on the log. " * 20
THREADS, CALLS = 8, 300


def test_calls_from_many_threads_each_get_their_own_settings():
    tok = byte_bpe_tokenizer()
    whole = len(encode(tok, TEXT)["input_ids"])
    assert whole > 40
    wrong, start = [], threading.Barrier(THREADS)

    def work(i: int) -> None:
        start.wait()
        for _ in range(CALLS):
            if i % 2:
                n = len(encode(tok, TEXT, truncation=True, max_length=10 + i)["input_ids"])
                if n != 10 + i:
                    wrong.append(("cut", i, n))
            else:
                n = len(encode(tok, TEXT)["input_ids"])
                if n != whole:
                    wrong.append(("whole", i, n))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong[:5]


def test_each_tokenizer_has_one_lock_of_its_own():
    a, b = byte_bpe_tokenizer(), byte_bpe_tokenizer()
    assert lock(a) is lock(a) and lock(a) is not lock(b)
