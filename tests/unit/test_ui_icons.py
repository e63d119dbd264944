"""Every icon the app shows is one of the Material Symbols Streamlit ships (":material/name:"), never an
emoji: a machine without an emoji font draws an emoji as an empty box. Read from the source: the
`icon=` and `page_icon=` arguments of every call, the pages' icons, and any emoji in a string."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from streamlit.errors import StreamlitAPIException
from streamlit.string_util import validate_material_icon

from mha_viz.ui.shell import navigation as pages
from tests import ui_sources

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "app.py", *ui_sources.MODULES]
ICON_ARGS = ("icon", "page_icon")
# pictographs, dingbats and symbols drawn as emoji, and the emoji variation selector (U+FE0F)
EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2139\u231A\u231B\u23E9-\u23FA\uFE0F]")


def material(icon: str) -> bool:
    """Whether Streamlit reads `icon` as one of its Material Symbols (its own check of the name)."""
    try:
        return icon.startswith(":material/") and bool(validate_material_icon(icon))
    except StreamlitAPIException:
        return False


def icon_strings(source: str, name: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of every string constant in an `icon=` / `page_icon=` argument of a call in
    `source` (both branches of `a if c else b` included)."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in ICON_ARGS:
                    found += [(c.lineno, c.value) for c in ast.walk(kw.value)
                              if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return found


def emoji_strings(source: str, name: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of every string constant in `source` that holds an emoji."""
    return [(n.lineno, n.value) for n in ast.walk(ast.parse(source, filename=name))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and EMOJI.search(n.value)]


def test_the_checks_see_a_planted_emoji():
    planted = ('st.info("x", icon="ℹ️")\nst.set_page_config(page_icon="🔎")\n'
               'st.warning("y", icon="⚠" if a else ":material/info:")')
    icons = icon_strings(planted)
    assert [text for _, text in icons] == ["ℹ️", "🔎", "⚠", ":material/info:"]
    assert [material(text) for _, text in icons] == [False, False, False, True]
    assert not material(":material/no_such_icon_name:")  # a name Streamlit does not ship is refused too
    assert [line for line, _ in emoji_strings('a = "📚 Corpus"\nb = "→ ␣ ⏎ × ≥"')] == [1]  # arrows, marks: text


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_icon_argument_is_a_material_icon(path):
    bad = [(line, text) for line, text in icon_strings(path.read_text(), str(path)) if not material(text)]
    assert not bad, f"{path.name}: {bad}"


def test_icon_arguments_are_found_in_the_app():
    """The scan reads the real calls (a scan that found none would pass on anything)."""
    assert sum(len(icon_strings(p.read_text(), str(p))) for p in SOURCES) > 50


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_string_of_the_ui_holds_an_emoji(path):
    found = emoji_strings(path.read_text(), str(path))
    assert not found, f"{path.name}: {found}"


def test_every_page_icon_is_a_material_icon():
    assert len(pages.PAGES) > 10
    bad = [(p.id, p.icon) for p in pages.PAGES if not material(p.icon)]
    assert not bad, bad
