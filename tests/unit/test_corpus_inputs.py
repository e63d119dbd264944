"""Corpus inputs (`mha_viz.corpus.inputs`): every format read back as the documents written,
and every broken file refused with a message that says what and where."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from mha_viz import InputError
from mha_viz.corpus import (
    SAMPLE_PATH,
    SAMPLE_SOURCE,
    CorpusError,
    corpus_hash,
    read_texts,
    read_upload,
)
from tests.helpers import ROOT

DOCS = ["The cat sat on the mat.", "Where is the dog?", 'She said "hi", then left.']


def _write(tmp_path, name, data):
    path = tmp_path / name
    (path.write_bytes if isinstance(data, bytes) else path.write_text)(data)
    return path


def test_a_list_is_read_as_is_without_blank_documents():
    assert read_texts(DOCS + ["   ", ""]) == DOCS
    assert read_texts(tuple(DOCS)) == DOCS


def test_a_list_with_a_non_text_is_refused():
    with pytest.raises(CorpusError, match="Document 2 of the list is a int"):
        read_texts(["fine", 3])


def test_txt_is_one_document_per_line_and_skips_empty_lines(tmp_path):
    path = _write(tmp_path, "c.txt", "\ufeff" + DOCS[0] + "\r\n\n   \n" + DOCS[1] + "\n" + DOCS[2] + "\n\n")
    assert read_texts(path) == DOCS
    assert read_texts(str(path)) == DOCS  # a str path too


def test_jsonl_reads_the_first_known_text_column_or_the_one_named(tmp_path):
    rows = [{"id": i, "sentence": d, "label": "x"} for i, d in enumerate(DOCS)]
    path = _write(tmp_path, "c.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert read_texts(path) == DOCS
    assert read_texts(path, text_column="label") == ["x"] * 3


def test_csv_reads_quoted_fields_with_commas_and_quotes(tmp_path):
    path = tmp_path / "c.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "content"])
        for i, d in enumerate(DOCS):
            w.writerow([i, d])
        w.writerow([9, ""])  # an empty document is skipped
    assert read_texts(path) == DOCS


@pytest.mark.parametrize("name, data", [
    ("c.csv", "id,label\n1,a\n"),
    ("c.jsonl", '{"id": 1, "label": "a"}\n'),
])
def test_a_missing_text_column_names_the_columns_found(tmp_path, name, data):
    path = _write(tmp_path, name, data)
    with pytest.raises(CorpusError, match="no text column.*id, label"):
        read_texts(path)
    with pytest.raises(CorpusError, match="'body'.*id, label"):
        read_texts(path, text_column="body")


def test_malformed_json_says_which_line(tmp_path):
    path = _write(tmp_path, "c.jsonl", '{"text": "fine"}\n\n{"text": "broken\n')
    with pytest.raises(CorpusError, match="line 3: not valid JSON"):
        read_texts(path)
    path = _write(tmp_path, "d.jsonl", '{"text": "fine"}\n["a list"]\n')
    with pytest.raises(CorpusError, match="line 2: expected a JSON object"):
        read_texts(path)
    path = _write(tmp_path, "e.jsonl", '{"text": "fine"}\n{"text": 42}\n')
    with pytest.raises(CorpusError, match="line 2: the 'text' value is a int"):
        read_texts(path)


def test_non_utf8_says_which_byte_and_line(tmp_path):
    data = "first line\nsecond caf".encode() + b"\xe9" + b" here\n"
    path = _write(tmp_path, "c.txt", data)
    offset = data.index(b"\xe9")
    with pytest.raises(CorpusError, match=rf"not UTF-8 text: byte {offset} \(line 2\) is 0xe9"):
        read_texts(path)


def test_a_binary_file_is_refused(tmp_path):
    path = _write(tmp_path, "c.txt", b"PK\x03\x04\x00\x00binary")
    with pytest.raises(CorpusError, match="binary"):
        read_texts(path)


def test_too_big_and_too_many(tmp_path):
    path = _write(tmp_path, "c.txt", "\n".join(f"document {i}" for i in range(50)))
    with pytest.raises(CorpusError, match="MiB; the limit is"):
        read_texts(path, max_bytes=100)
    with pytest.raises(CorpusError, match="has 50 documents; the limit is 10"):
        read_texts(path, max_docs=10)
    assert len(read_texts(path, max_docs=50, max_bytes=10_000)) == 50


@pytest.mark.parametrize("source", [[], ["", "  "], "EMPTY"])
def test_no_documents(tmp_path, source):
    if source == "EMPTY":
        source = _write(tmp_path, "c.txt", "\n\n  \n")
    with pytest.raises(CorpusError, match="no documents"):
        read_texts(source)


def test_missing_file_folder_and_unknown_format(tmp_path):
    with pytest.raises(CorpusError, match="No file at"):
        read_texts(tmp_path / "nope.txt")
    with pytest.raises(CorpusError, match="is a folder"):
        read_texts(tmp_path)
    with pytest.raises(CorpusError, match="not a corpus file"):
        read_texts(_write(tmp_path, "c.pdf", "text"))


def test_a_dataset_id_without_datasets_or_hub_gets_a_message():
    with pytest.raises(CorpusError, match="dataset 'someone/some-corpus'"):
        read_texts("someone/some-corpus")


def test_corpus_error_is_an_input_error():
    assert issubclass(CorpusError, InputError)


def test_upload_is_checked_like_a_file():
    assert read_upload("a\n\nb\n".encode(), "up.txt", max_docs=5, max_bytes=100) == ["a", "b"]
    with pytest.raises(CorpusError, match="up.txt is not UTF-8"):
        read_upload(b"\xff\xfe", "up.txt", max_docs=5, max_bytes=100)
    with pytest.raises(CorpusError, match="limit is"):
        read_upload(b"x" * 200, "up.txt", max_docs=5, max_bytes=100)
    with pytest.raises(CorpusError, match="has 3 documents; the limit is 2"):
        read_upload(b"a\nb\nc\n", "up.txt", max_docs=2, max_bytes=100)
    assert read_upload(b'{"text": "x"}\n', "up.jsonl", max_docs=2, max_bytes=100) == ["x"]


def test_the_bundled_sample():
    docs = read_texts("sample")
    assert 300 <= len(docs) <= 400
    assert len(set(docs)) == len(docs)
    words = [len(d.split()) for d in docs]
    assert min(words) >= 4 and 50 <= max(words) <= 70
    assert not SAMPLE_PATH.read_text().startswith("#")  # the file is documents only
    assert "CC0" in SAMPLE_SOURCE


def test_corpus_hash_is_stable_and_sees_boundaries():
    h = corpus_hash(DOCS)
    assert h == corpus_hash(list(DOCS)) and len(h) == 64
    assert corpus_hash(["ab", "c"]) != corpus_hash(["a", "bc"])
    assert corpus_hash(DOCS) != corpus_hash(DOCS[::-1])


def test_the_corpus_core_imports_neither_ray_nor_streamlit():
    code = "import sys, mha_viz.corpus; print(sorted({'ray', 'streamlit'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_json_nested_too_deeply_is_a_message(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 200_000 + "\n")
    with pytest.raises(CorpusError, match="nested too deeply|not valid JSON"):
        read_texts(path)
