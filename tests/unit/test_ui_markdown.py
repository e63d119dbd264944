"""No message shows raw Markdown. `mha_viz.ui.kit.text.plain` escapes every Markdown character (a message
quoting user input must not become markup), so Markdown written into a message that goes through it
shows as typed: "*Show attention as*" with its asterisks. Read from the source: what `plain(...)` is
given and what an error says (errors reach the page through `plain`) hold no Markdown of their own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mha_viz.ui.kit.text import plain
from tests import ui_sources

ROOT = Path(__file__).resolve().parents[2]
UI = [ROOT / "app.py", *ui_sources.MODULES]
CORE = sorted(p for p in (ROOT / "mha_viz").rglob("*.py") if "ui" not in p.relative_to(ROOT / "mha_viz").parts[:1])
# *emphasis*, **strong**, `code`: what a writer means as Markdown in a message
MARKDOWN = re.compile(r"(?<![\w*\\])\*[^\s*][^*]*\*(?![\w*])|\*\*\S|`[^`\s][^`]*`")


def _strings(node: ast.AST) -> list[str]:
    """The literal text of the strings in `node` (an f-string's literal parts joined around its fields)."""
    out, parts = [], set()
    for n in ast.walk(node):  # an f-string is met before its parts
        if isinstance(n, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values))
            parts |= {id(v) for v in n.values}
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in parts:
            out.append(n.value)
    return out


def _message(call: ast.Call) -> ast.AST:
    """A call's arguments as one node (its string concatenations and f-strings)."""
    return ast.Tuple(elts=[*call.args, *(kw.value for kw in call.keywords)], ctx=ast.Load())


def markdown_in_plain(source: str) -> list[tuple[int, str]]:
    """(line, text) of Markdown inside a `plain(...)` argument."""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "plain"]
    return [(c.lineno, s) for c in calls for s in _strings(_message(c)) if MARKDOWN.search(s)]


def markdown_in_errors(source: str) -> list[tuple[int, str]]:
    """(line, text) of Markdown in what a `raise SomeError(...)` says."""
    raised = [n.exc for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)]
    return [(c.lineno, s) for c in raised for s in _strings(_message(c)) if MARKDOWN.search(s)]


def test_the_checks_see_planted_markdown():
    planted = ('st.info(plain(f"{name} is an encoder; *Show attention as* shows it"))\n'
               'st.info(plain("the `datasets` package"))\n'
               'st.info(plain("a * b and 2*3, file_name_x"))\n'
               'raise InputError("Set the sidebar\'s **Token limit**")\n'
               'raise InputError(f"{n} tokens * 2 bytes")\n')
    assert [line for line, _ in markdown_in_plain(planted)] == [1, 2]
    assert [line for line, _ in markdown_in_errors(planted)] == [4]
    assert "\\*" in plain("*Show attention as*")  # why: plain shows the asterisks as typed


@pytest.mark.parametrize("path", UI, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_markdown_goes_through_plain(path):
    found = markdown_in_plain(path.read_text())
    assert not found, f"{path.name}: {found}"


@pytest.mark.parametrize("path", [*UI, *CORE], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_error_message_is_written_in_markdown(path):
    found = markdown_in_errors(path.read_text())
    assert not found, f"{path.relative_to(ROOT)}: {found}"


def test_a_long_prompt_streams_as_its_tail_from_a_word_start():
    from mha_viz.ui.kit.text import FOLD_ABOVE, tail

    short = "The cat sat on the mat."
    assert tail(short) == short
    novel = " ".join(f"word{i}" for i in range(5_000))  # about 44,000 characters
    shown = tail(novel)
    assert shown.startswith("… word") and novel.endswith(shown[2:])  # a whole word after the mark
    assert FOLD_ABOVE // 2 <= len(shown) <= FOLD_ABOVE + 1
    unbroken = "x" * 2_000  # no space to cut at: the last characters as they are
    assert tail(unbroken) == "…" + "x" * FOLD_ABOVE
