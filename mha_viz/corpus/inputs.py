"""A corpus as a list of documents: from a list of strings, a `.txt` / `.jsonl` / `.csv` file,
bytes uploaded to the app, a Hugging Face dataset id or the bundled sample.

The bundled sample (`sample.txt`, one document per line) was written for mha-viz and is
dedicated to the public domain (CC0): a few hundred varied English sentences (narrative,
dialogue, questions, lists, numbers, code-like lines, names, repeated phrases for induction,
long-range agreement, pronouns) of 4 to about 60 words.

Every problem with an input is a `CorpusError` whose message is written for the person who
chose the file: what is wrong and where (line, byte offset, column names found).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path

from mha_viz.text.tokenize import InputError

SAMPLE = "sample"
SAMPLE_PATH = Path(__file__).with_name("sample.txt")
SAMPLE_SOURCE = ("mha-viz's sample corpus: sentences written for the project, "
                 "dedicated to the public domain (CC0)")
TEXT_COLUMNS = ("text", "sentence", "content", "document")  # tried in this order
FORMATS = {".txt": "txt", ".text": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?(:[\w.-]+)?$")  # owner/name[:split]
_BINARY_PROBE = 8192  # bytes looked at for NUL bytes


class CorpusError(InputError):
    """The corpus cannot be read; the message says what is wrong and where."""


def read_texts(source, *, text_column: str | None = None, max_docs: int | None = None,
               max_bytes: int | None = None) -> list[str]:
    """The documents of `source`, blank ones left out, in order.

    source: a list or tuple of strings; a path (str or Path) to a `.txt` file (one document a
    line), a `.jsonl` file (one JSON object a line) or a `.csv` file with a header; "sample"
    (the bundled corpus); or a Hugging Face dataset id ("owner/name" or "owner/name:split"),
    which needs the `datasets` package and the hub. The text column of JSONL, CSV and datasets
    is `text_column`, else the first of TEXT_COLUMNS present.
    Raises CorpusError: missing, binary, non-UTF-8 or oversized file (`max_bytes`), more than
    `max_docs` documents, no documents, no text column, malformed JSON.
    """
    if isinstance(source, (list, tuple)):
        return _checked([_as_text(d, i) for i, d in enumerate(source)], max_docs, "The list")
    if not isinstance(source, (str, Path)):
        raise CorpusError(f"A corpus is a list of texts, a file path or a dataset id; got {type(source).__name__}.")
    if isinstance(source, str) and source.strip() == SAMPLE:
        source = SAMPLE_PATH
    path = Path(source).expanduser()
    if _is_file(path):
        size = path.stat().st_size
        _check_size(size, max_bytes, path.name)
        return parse(path.read_bytes(), _format(path.name), text_column=text_column, max_docs=max_docs,
                     label=path.name)
    if _is_file(path) is None:
        raise CorpusError(f"'{source}' is a folder, not a file; choose a .txt, .jsonl or .csv file.")
    text = str(source).strip()
    if isinstance(source, str) and path.suffix.lower() not in FORMATS and _HUB_ID.match(text):
        return _hub_dataset(text, text_column, max_docs)
    raise CorpusError(f"No file at '{source}'. Give a .txt, .jsonl or .csv file, a dataset id, or 'sample'.")


def read_upload(data: bytes, name: str, *, max_docs: int | None, max_bytes: int | None,
                text_column: str | None = None) -> list[str]:
    """The documents of an uploaded file (its bytes and its name, which gives the format)."""
    _check_size(len(data), max_bytes, name)
    return parse(data, _format(name), text_column=text_column, max_docs=max_docs, label=name)


def parse(data: bytes, kind: str, *, text_column: str | None = None, max_docs: int | None = None,
          label: str = "The file") -> list[str]:
    """The documents in the bytes of a file of format `kind` ("txt", "jsonl" or "csv")."""
    text = _decode(data, label)
    if kind == "txt":
        docs = [line.strip() for line in text.split("\n")]
    elif kind == "jsonl":
        docs = _jsonl(text, text_column, label)
    elif kind == "csv":
        docs = _csv(text, text_column, label)
    else:
        raise CorpusError(f"Unknown corpus format {kind!r}; use txt, jsonl or csv.")
    return _checked(docs, max_docs, label)


def corpus_hash(texts: Iterable[str]) -> str:
    """sha256 (hex) of the documents in order, each length-prefixed so that no two different
    lists of documents give the same bytes. Stable across runs and machines."""
    h = hashlib.sha256()
    for doc in texts:
        b = doc.encode("utf-8")
        h.update(f"{len(b)}:".encode())
        h.update(b)
    return h.hexdigest()


def _is_file(path: Path) -> bool | None:
    """True for a file, None for something else that exists (a folder), False for nothing."""
    try:
        return True if path.is_file() else (None if path.exists() else False)
    except (OSError, ValueError):  # a name too long, or with a NUL byte: not a path
        return False


def _as_text(doc, i: int) -> str:
    if not isinstance(doc, str):
        raise CorpusError(f"Document {i + 1} of the list is a {type(doc).__name__}, not a text.")
    return doc.strip()


def _checked(docs: list[str], max_docs: int | None, label: str) -> list[str]:
    docs = [d for d in docs if d]
    if not docs:
        raise CorpusError(f"{label} has no documents (every line or text is empty).")
    if max_docs is not None and len(docs) > max_docs:
        raise CorpusError(f"{label} has {len(docs):,} documents; the limit is {max_docs:,}. "
                          "Use fewer documents.")
    return docs


def _check_size(size: int, max_bytes: int | None, label: str) -> None:
    if max_bytes is not None and size > max_bytes:
        raise CorpusError(f"{label} is {size / 2**20:.1f} MiB; the limit is {max_bytes / 2**20:.1f} MiB.")


def _format(name: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in FORMATS:
        raise CorpusError(f"'{name}' is not a corpus file this app reads: use .txt (one document a "
                          "line), .jsonl or .csv (with a text column).")
    return FORMATS[suffix]


def _decode(data: bytes, label: str) -> str:
    if b"\x00" in data[:_BINARY_PROBE]:
        raise CorpusError(f"{label} looks like a binary file (it has NUL bytes), not text.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorpusError(f"{label} is not UTF-8 text: byte {exc.start:,} (line {line}) is "
                          f"0x{data[exc.start]:02x}. Save it as UTF-8.") from exc


def _column(found: list[str], wanted: str | None, label: str) -> str:
    if wanted is not None and wanted in found:
        return wanted
    if wanted is None:
        for name in TEXT_COLUMNS:
            if name in found:
                return name
    looked = f"'{wanted}'" if wanted else "one of " + ", ".join(TEXT_COLUMNS)
    shown = ", ".join(found) if found else "none"
    raise CorpusError(f"{label} has no text column ({looked}); its columns are: {shown}.")


def _jsonl(text: str, wanted: str | None, label: str) -> list[str]:
    docs, column = [], None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{label}, line {number}: not valid JSON ({exc.msg}).") from exc
        except RecursionError as exc:  # 200,000 nested brackets
            raise CorpusError(f"{label}, line {number}: JSON nested too deeply to read.") from exc
        if not isinstance(row, dict):
            raise CorpusError(f"{label}, line {number}: expected a JSON object, found {type(row).__name__}.")
        column = column or _column(list(row), wanted, f"{label} (line {number})")
        docs.append(_cell(row.get(column), column, f"{label}, line {number}"))
    return docs


def _csv(text: str, wanted: str | None, label: str) -> list[str]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        column = _column(list(reader.fieldnames or []), wanted, label)
        return [_cell(row.get(column), column, f"{label}, line {reader.line_num}") for row in reader]
    except csv.Error as exc:
        raise CorpusError(f"{label}, line {reader.line_num}: not valid CSV ({exc}).") from exc


def _cell(value, column: str, where: str) -> str:
    if value is None:
        return ""  # a row without the text: skipped like an empty line
    if not isinstance(value, str):
        raise CorpusError(f"{where}: the '{column}' value is a {type(value).__name__}, not a text.")
    return value.strip()


def _hub_dataset(spec: str, wanted: str | None, max_docs: int | None) -> list[str]:
    """A Hugging Face dataset's split (default "train") read through `datasets`."""
    name, _, split = spec.partition(":")
    try:
        # heavy optional (datasets): imported only when a dataset id is given
        import datasets
    except ImportError as exc:
        raise CorpusError(f"Reading the dataset '{name}' needs the datasets package, which is not "
                          "installed (pip install datasets). Or save the texts as .txt, .jsonl or .csv.") from exc
    try:
        data = datasets.load_dataset(name, split=split or "train")
    except Exception as exc:  # noqa: BLE001 - offline, unknown id, missing split: all said the same way
        first = (str(exc).splitlines() or [""])[0][:300]
        raise CorpusError(f"Cannot load the dataset '{spec}' ({type(exc).__name__}: {first}). "
                          "Is the hub reachable, and the id and split right?") from exc
    column = _column(list(data.column_names), wanted, f"The dataset '{spec}'")
    if max_docs is not None and len(data) > max_docs:
        raise CorpusError(f"The dataset '{spec}' has {len(data):,} documents; the limit is {max_docs:,}.")
    return _checked([_cell(v, column, f"The dataset '{spec}'") for v in data[column]], max_docs,
                    f"The dataset '{spec}'")
