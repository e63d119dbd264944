"""The UI's house rules, read from its source: only `ui/session.py` touches `st.session_state`,
every key the app reads or writes is a name in `ui/keys.py` (no string literal as a key), no two
names there share a value, no page module imports another (what two pages share is a module of its
own) and none is over 300 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from mha_viz import catalogue
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


def _shared_values(names: dict[str, str]) -> dict[str, list[str]]:
    """value -> the names that share it (keys.KEEP may be shared: it is a prefix, not a key)."""
    by_value: dict[str, list[str]] = {}
    for name, value in names.items():
        by_value.setdefault(value, []).append(name)
    return {v: n for v, n in by_value.items() if len(n) > 1 and v not in (keys.KEEP,)}


def _used_key_names() -> set[str]:
    """Every `keys.NAME` the UI sources read."""
    return {node.attr for path in SOURCES for node in ast.walk(_tree(path))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "keys"
            and node.attr.isupper()}


def test_no_two_key_names_share_a_value():
    names = {n: v for n, v in vars(keys).items() if n.isupper() and isinstance(v, str)}
    used = {n for n in _used_key_names() if isinstance(getattr(keys, n), str)}
    assert used and used <= set(names)  # the check sees every key a page reads
    assert _shared_values({"A": "x", "B": "x", "C": "y"}) == {"x": ["A", "B"]}  # a planted clash is seen
    shared = _shared_values(names)
    assert not shared, shared


INPUTS = {"selectbox", "radio", "text_input", "text_area", "number_input", "slider", "select_slider", "checkbox",
          "toggle", "multiselect", "pills", "segmented_control", "data_editor", "file_uploader"}
# inputs whose key is a parameter: module -> how many (shared_head and subset_views are passed NOT_KEPT keys;
# head_scatter_view a page's kept ScatterKeys, whose staying is tests/app/test_app_head_scatter.py's)
UNKEYED = {"shared_head": 2, "subset_views": 2, "head_scatter_view": 3}


def _key_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.JoinedStr):
        node = node.values[0].value
    return node.attr if isinstance(node, ast.Attribute) and _is_key_name(node) else None


def test_every_input_keeps_its_value_across_pages_or_is_listed_as_not_kept():
    unkept, unkeyed, needless = [], {}, []
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in INPUTS):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            kept = "persist_state" in kw and ast.unparse(kw["persist_state"]) == "keys.KEEP"
            name = _key_name(kw["key"]) if "key" in kw else None
            if name is None:
                unkeyed[path.stem] = unkeyed.get(path.stem, 0) + 1
            elif not kept and getattr(keys, name) not in keys.NOT_KEPT:
                unkept.append(f"{path.name}:{node.lineno} {name}")
            elif kept and getattr(keys, name) in keys.NOT_KEPT:
                needless.append(f"{path.name}:{node.lineno} {name}")
    assert not unkept, unkept  # keep it (persist_state=keys.KEEP), or list it in keys.NOT_KEPT with its reason
    assert not needless, needless  # kept, yet listed as not kept
    assert unkeyed == UNKEYED


PAGES = sorted((ROOT / "mha_viz" / "ui").glob("*_page.py"))
MAX_PAGE_LINES = 300


def _imported_ui_modules(path: Path) -> set[str]:
    """The `mha_viz.ui` modules `path` imports, function-local imports included."""
    found = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found |= {a.name.rsplit(".", 1)[-1] for a in node.names if a.name.startswith("mha_viz.ui.")}
        elif isinstance(node, ast.ImportFrom) and node.module == "mha_viz.ui":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mha_viz.ui."):
            found.add(node.module.rsplit(".", 1)[-1])
    return found


def test_no_page_module_imports_another():
    pages = {p.stem for p in PAGES}
    registered = {f"{page}_page" for page in catalogue.ids()}  # pages.py makes a page of each feature's record
    assert pages == registered  # every page the app registers is checked, and no page file is orphaned
    imports = {p.stem: sorted(_imported_ui_modules(p) & (pages - {p.stem})) for p in PAGES}
    assert not {page: others for page, others in imports.items() if others}, imports


def test_no_page_module_is_over_300_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PAGES}
    assert not {name: n for name, n in sizes.items() if n > MAX_PAGE_LINES}, sizes


def test_server_wide_caches_read_no_session():
    """analysis.py and steps.py hold caches shared by every session: what a result depends on comes
    in as arguments, never from the session or this rerun's state."""
    for name in ("analysis.py", "steps.py"):
        reads = [f"{name}:{node.lineno} {ast.unparse(node)}" for node in ast.walk(_tree(ROOT / "mha_viz" / "ui" / name))
                 if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                 and (node.value.id == "session" or (node.value.id == "state" and node.attr == "current"))]
        assert not reads, reads
