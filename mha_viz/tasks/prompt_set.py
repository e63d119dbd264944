"""`PromptSet`: pairs of (clean, corrupted, answer, wrong) that make a task, from a user's CSV or JSONL file or
from a generator of a standard task (`tasks.generators`), and the checks a set passes before any forward:
answer and wrong tokens that are single tokens, clean and corrupted texts of the same length in tokens. A pair
that fails is left out and counted by its reason (`Checked.left_out`), never silently."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mha_viz.interventions.patching import token_id
from mha_viz.text.tokenize import InputError, tokenize
from mha_viz_models import LoadedModel

COLUMNS = ("clean", "corrupted", "answer", "wrong")


@dataclass(frozen=True)
class Pair:
    """One prompt pair: the clean and the corrupted prompt, the answer the clean one should be continued with
    and the wrong token the corrupted one favours (both single tokens of the model, with their leading space)."""
    clean: str
    corrupted: str
    answer: str
    wrong: str


@dataclass(frozen=True)
class PromptSet:
    """A task: its pairs, and where they came from (`source`: a file name, or a generator with its seed and
    size, e.g. "ioi(n=100, seed=0)") for links, notebooks and reports."""
    pairs: tuple[Pair, ...]
    source: str = "pairs"

    def __post_init__(self) -> None:
        if not self.pairs:
            raise InputError(f"The prompt set {self.source!r} holds no pairs.")

    def __len__(self) -> int:
        return len(self.pairs)

    @classmethod
    def of(cls, rows, source: str = "pairs") -> PromptSet:
        """From (clean, corrupted, answer, wrong) tuples or mappings with those keys."""
        pairs = []
        for i, row in enumerate(rows):
            values = [row[c] for c in COLUMNS] if isinstance(row, dict) else list(row)
            if len(values) != 4 or not all(isinstance(v, str) for v in values):
                raise InputError(f"Pair {i} of {source!r} is not four texts ({', '.join(COLUMNS)}).")
            pairs.append(Pair(*values))
        return cls(tuple(pairs), source)

    @classmethod
    def from_file(cls, path: str | Path, text: str | None = None) -> PromptSet:
        """A CSV (a header row with the columns clean, corrupted, answer, wrong) or JSONL (one object a line
        with those keys) file; `text`: its contents when already read (an upload). InputError names what is
        missing and where."""
        path = Path(path)
        body = path.read_text(encoding="utf-8") if text is None else text
        if path.suffix.lower() == ".jsonl":
            rows = []
            for number, line in enumerate(body.splitlines(), 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise InputError(f"Line {number} of {path.name} is not JSON: {exc.msg}.") from None
        elif path.suffix.lower() == ".csv":
            reader = csv.DictReader(io.StringIO(body))
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise InputError(f"{path.name} has no column {', '.join(missing)}: a prompt set's CSV has a header "
                                 f"row with the columns {', '.join(COLUMNS)}.")
            rows = list(reader)
        else:
            raise InputError(f"{path.name}: a prompt set is a .csv or a .jsonl file.")
        for number, row in enumerate(rows, 1):
            missing = [c for c in COLUMNS if not isinstance(row, dict) or row.get(c) is None]
            if missing:
                raise InputError(f"Row {number} of {path.name} has no {', '.join(missing)}: a prompt set's rows "
                                 f"have the columns {', '.join(COLUMNS)}.")
        return cls.of(rows, path.name)


@dataclass
class Checked:
    """What of a set a model can run: each kept pair's token ids (clean, corrupted) and its answer and wrong ids,
    and how many pairs were left out for each reason."""
    kept: list[int]  # indices into the set's pairs
    clean_ids: list[list[int]]
    corrupted_ids: list[list[int]]
    answers: list[int]
    wrongs: list[int]
    left_out: Counter = field(default_factory=Counter)

    def report(self) -> str:
        out = f"{len(self.kept)} pairs kept"
        if self.left_out:
            out += "; left out: " + ", ".join(f"{count} ({why})" for why, count in self.left_out.items())
        return out


UNKNOWN = "the answer or the wrong token is not in the model's vocabulary (its unknown token)"


def _one_token(model: LoadedModel, token: str) -> int | None:
    try:
        return token_id(model, token)
    except InputError:  # not exactly one token
        return None


def _unknown(model: LoadedModel, *ids: int) -> bool:
    """Whether one of `ids` is the tokenizer's unknown token (a word outside a small vocabulary)."""
    unk = getattr(model.tokenizer, "unk_token_id", None)
    return unk is not None and any(i == unk for i in ids)


def check(model: LoadedModel, prompts: PromptSet, max_tokens: int | None = None) -> Checked:
    """The pairs `model` can run (`Checked`); InputError when none is left, with the reasons."""
    out = Checked([], [], [], [], [])
    for i, pair in enumerate(prompts.pairs):
        a, b = _one_token(model, pair.answer), _one_token(model, pair.wrong)
        c, x = tokenize(model, pair.clean, max_tokens), tokenize(model, pair.corrupted, max_tokens)
        clean, corrupted = c.ids, x.ids
        why = ("the answer is not one token" if a is None else "the wrong token is not one token" if b is None
               else UNKNOWN if _unknown(model, a, b)
               else "the answer and the wrong token are the same" if a == b
               else "longer than the token limit" if c.truncated or x.truncated
               else "clean and corrupted differ in length" if len(clean) != len(corrupted) else None)
        if why is not None:
            out.left_out[why] += 1
            continue
        out.kept.append(i)
        out.clean_ids.append([int(t) for t in clean])
        out.corrupted_ids.append([int(t) for t in corrupted])
        out.answers.append(a)
        out.wrongs.append(b)
    if not out.kept:
        raise InputError(f"No pair of {prompts.source!r} can run on {model.name}: {out.report()}.")
    return out


def is_task(clean, corrupted, options: dict, what: str) -> bool:
    """Whether a method was given a task (`clean` a PromptSet) rather than one pair; for a pair, InputError
    without a corrupted text and TypeError for options only a set takes (resamples, seed, …)."""
    if isinstance(clean, PromptSet):
        return True
    if corrupted is None:
        raise InputError(f"{what} needs a corrupted text beside the clean one (or a PromptSet).")
    if options:
        raise TypeError(f"{', '.join(options)}: options of a PromptSet, not of one pair")
    return False
