"""`mha-viz corpus --first N` (issue 43): the saved statistics are those of the corpus's first N
documents, the same as the library computes on them; a count that is not a positive whole number is
refused by the parser (exit code 2) before anything runs."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import cli, corpus

LETTERS = ["a b c d a b c d", "q w e r t y q w e r t y", "m n o p", "z y x", "h e l l o h e l l o", "k k k k"]


def test_first_keeps_the_first_documents(tmp_path):
    source = tmp_path / "letters.txt"
    source.write_text("\n".join(LETTERS) + "\n", encoding="utf-8")
    out = tmp_path / "stats"
    code = cli.main(["corpus", "--model", "toy-induction", "--input", str(source), "--out", str(out), "--first", "4",
                     "--no-importance", "--max-tokens", "16"])
    assert code == 0
    saved = corpus.CorpusStats.load(out)
    want = corpus.head_statistics(mha_viz.load_model("toy-induction"), LETTERS[:4], max_tokens=16, importance=False)
    assert saved.n_docs == 4 and saved.corpus_hash == corpus.corpus_hash(LETTERS[:4])
    np.testing.assert_allclose(saved.grid("entropy"), want.grid("entropy"), atol=1e-6)


@pytest.mark.parametrize("bad", ["0", "-3", "two"])
def test_first_must_be_a_positive_whole_number(tmp_path, bad, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["corpus", "--model", "toy-induction", "--input", "sample", "--out", str(tmp_path), "--first", bad])
    assert stop.value.code == 2 and "positive whole number" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing ran
