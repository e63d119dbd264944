"""The UI's house rules, read from its source: only `ui/session.py` touches `st.session_state`,
every key the app reads or writes is a name in `ui/keys.py` (no string literal as a key), and
no two names there share a value."""

from __future__ import annotations

import ast
from pathlib import Path

from mha_viz.ui import keys

ROOT = Path(__file__).resolve().parents[2]
UI = sorted((ROOT / "mha_viz" / "ui").glob("*.py"))
SOURCES = [ROOT / "app.py", *UI]


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), filename=str(path))


def _is_key_name(node: ast.AST) -> bool:
    """keys.X, or an f-string that starts with {keys.X} (a prefix and a part)."""
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "keys" and hasattr(keys, node.attr)
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.FormattedValue):
        return _is_key_name(node.values[0].value)
    return False


def _literal(node: ast.AST) -> bool:
    return isinstance(node, (ast.Constant, ast.JoinedStr)) and not _is_key_name(node)


def test_only_the_session_module_touches_session_state():
    touching = sorted(p.relative_to(ROOT).as_posix() for p in SOURCES
                      for node in ast.walk(_tree(p))
                      if isinstance(node, ast.Attribute) and node.attr == "session_state")
    assert touching and set(touching) == {"mha_viz/ui/session.py"}, touching


def test_every_session_key_and_widget_key_is_a_name_in_keys():
    literal = []
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "session"
                    and node.args and _literal(node.args[0])):
                literal.append(f"{path.name}:{node.lineno} session.{func.attr}({ast.unparse(node.args[0])})")
            literal += [f"{path.name}:{node.lineno} key={ast.unparse(kw.value)}" for kw in node.keywords
                        if kw.arg == "key" and _literal(kw.value)
                        and not (isinstance(kw.value, ast.Constant) and kw.value.value is None)]
    assert not literal, literal


def test_no_two_key_names_share_a_value():
    names = {n: v for n, v in vars(keys).items() if n.isupper() and isinstance(v, str)}
    assert len(names) > 150
    by_value = {}
    for name, value in names.items():
        by_value.setdefault(value, []).append(name)
    shared = {v: n for v, n in by_value.items() if len(n) > 1 and v not in (keys.KEEP,)}
    assert not shared, shared
