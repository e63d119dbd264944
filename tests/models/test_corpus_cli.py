"""`python -m mha_viz corpus` end to end, as a subprocess: the folder it saves loads and equals
`head_statistics` run in-process; a bad input is exit code 2 with a one-line message (`cli.main`, what
`python -m mha_viz` exits with, called in this process: a subprocess costs an import of torch, about 4 s)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from mha_viz import cli, corpus
from tests.helpers import ROOT

pytestmark = pytest.mark.model  # minilm

LINES = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog.", "",
         "Attention heads look at tokens; some look back.", "Hello world, hello attention, hello heads.",
         "The keeper lit the lamp and watched the ships come home.", "Is this a question?",
         "1, 2, 3, 4 and 5 are numbers.", "She said that the books on the shelf were hers.",
         "def f(x): return x + 1", "The storm came in the winter of that year."]


def _cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "mha_viz", "corpus", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_saves_what_head_statistics_computes(tmp_path):
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "stats"
    done = _cli("--model", "minilm", "--input", str(source), "--engine", "local", "--out", str(out),
                "--batch-size", "4", "--max-tokens", "32")
    assert done.returncode == 0, done.stderr
    assert "10 of 10 documents" in done.stderr and "documents/s" in done.stderr and "finishing" in done.stderr
    assert str(out) in done.stdout and "importance" in done.stdout
    saved = corpus.CorpusStats.load(out)
    here = corpus.head_statistics("minilm", str(source), batch_size=4, max_tokens=32)
    assert saved.n_docs == here.n_docs == 10 and saved.corpus_hash == here.corpus_hash
    numeric = [c for c in here.table.columns if c != "pattern"]
    np.testing.assert_allclose(saved.table[numeric].to_numpy(float), here.table[numeric].to_numpy(float),
                               rtol=1e-5, atol=1e-6)
    assert (saved.table["pattern"] == here.table["pattern"]).all()
    np.testing.assert_allclose(saved.importance, here.importance, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(saved.similarity, here.similarity, rtol=1e-5, atol=1e-6)




def test_cli_examples_are_saved_with_the_statistics(tmp_path):
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "stats"
    done = _cli("--model", "minilm", "--input", str(source), "--out", str(out), "--batch-size", "4",
                "--max-tokens", "32", "--no-importance", "--examples")
    assert done.returncode == 0, done.stderr
    assert "head examples:" in done.stdout and "KiB a head" in done.stdout
    saved = corpus.CorpusStats.load(out).examples
    here = corpus.head_examples("minilm", str(source), batch_size=4, max_tokens=32)
    for layer, head in ((0, 0), (4, 7)):
        assert [d for d, _ in saved.top(layer, head)] == [d for d, _ in here.top(layer, head)]


@pytest.mark.parametrize("problem", ["missing", "binary", "model"])
def test_bad_input_is_exit_2_with_one_line(tmp_path, capsys, problem):
    source = tmp_path / "docs.txt"
    source.write_text("one line\nanother line\n", encoding="utf-8")
    model = "minilm"
    if problem == "missing":
        source = tmp_path / "nothing-here.txt"
    elif problem == "binary":
        source.write_bytes(b"\x00\xff\xfe binary \x00")
    else:
        model = str(tmp_path / "no-such-model")
    code = cli.main(["corpus", "--model", model, "--input", str(source), "--out", str(tmp_path / "stats"),
                     "--no-importance"])  # an exception would fail the test: no traceback for the user
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    message = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(message) == 1 and len(message[0]) > len("error: ") + 10
    assert not (tmp_path / "stats").exists()
