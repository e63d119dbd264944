"""The UI's house rules, read from its source: only `ui/kit/session.py` touches `st.session_state`,
every key the app reads or writes is a name in `ui/kit/keys.py` or in a feature's `features/<id>/controls.py` (no
string literal as a key), no two names there share a value, no page module imports another (what two pages share
is a module of its own) and none is over 400 lines (the house's limit for every module)."""

from __future__ import annotations

import ast
from pathlib import Path

from mha_viz import catalogue
from mha_viz.ui.kit import keys
from tests import ui_sources

ROOT = Path(__file__).resolve().parents[2]
UI = ui_sources.MODULES
SOURCES = [ROOT / "app.py", *UI]


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), filename=str(path))


def _is_key_name(node: ast.AST) -> bool:
    """keys.X or <page>_keys.X, or an f-string that starts with one (a prefix and a part)."""
    if isinstance(node, ast.Attribute):
        return ui_sources.key_value(node) is not None
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.FormattedValue):
        return _is_key_name(node.values[0].value)
    return False


def _literal(node: ast.AST) -> bool:
    return isinstance(node, (ast.Constant, ast.JoinedStr)) and not _is_key_name(node)


def test_only_the_session_module_touches_session_state():
    touching = sorted(p.relative_to(ROOT).as_posix() for p in SOURCES
                      for node in ast.walk(_tree(p))
                      if isinstance(node, ast.Attribute) and node.attr == "session_state")
    assert touching and set(touching) == {"mha_viz/ui/kit/session.py"}, touching


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
    """Every `keys.NAME` and `<page>_keys.NAME` the UI sources read, as written."""
    return {ast.unparse(node) for path in SOURCES for node in ast.walk(_tree(path))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in ui_sources.KEY_MODULES and node.attr.isupper()}


def test_no_two_key_names_share_a_value():
    names = ui_sources.key_names()
    used = {n for n in _used_key_names()
            if isinstance(getattr(ui_sources.KEY_MODULES[n.split(".")[0]], n.split(".")[1], None), str)}
    assert len(used) > 300 and used <= set(names)  # the check sees every key a page reads, its own or the kit's
    assert _shared_values({"A": "x", "B": "x", "C": "y"}) == {"x": ["A", "B"]}  # a planted clash is seen
    shared = _shared_values(names)
    assert not shared, shared


INPUTS = {"selectbox", "radio", "text_input", "text_area", "number_input", "slider", "select_slider", "checkbox",
          "toggle", "multiselect", "pills", "segmented_control", "data_editor", "file_uploader"}
# inputs whose key is a parameter: module (a kit module's name, a feature's path) -> how many (shared_head and the
# head view's chosen queries and keys are passed NOT_KEPT keys;
# head_scatter_view a page's kept ScatterKeys, whose staying is tests/app/test_app_head_scatter.py's; seq2seq_views
# an encoder-decoder page's own keys, five kept and two, the cross token and the step, in their feature's NOT_KEPT)
UNKEYED = {"shared_head": 2, "head_view/page.py": 2, "head_scatter_view": 3, "seq2seq_views": 7}


def _key_name(node: ast.AST) -> str | None:
    """The value of the key `node` names (a key module's name, or an f-string that starts with one)."""
    if isinstance(node, ast.JoinedStr):
        node = node.values[0].value
    return ui_sources.key_value(node) if isinstance(node, ast.Attribute) and _is_key_name(node) else None


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
                where = (path.relative_to(ui_sources.FEATURES).as_posix() if ui_sources.FEATURES in path.parents
                         else path.stem)
                unkeyed[where] = unkeyed.get(where, 0) + 1
            elif not kept and name not in ui_sources.NOT_KEPT:
                unkept.append(f"{path.name}:{node.lineno} {name}")
            elif kept and name in ui_sources.NOT_KEPT:
                needless.append(f"{path.name}:{node.lineno} {name}")
    assert not unkept, unkept  # keep it (persist_state=keys.KEEP), or list it in keys.NOT_KEPT with its reason
    assert not needless, needless  # kept, yet listed as not kept
    assert unkeyed == UNKEYED


# the arguments that give an input a default, each with the place it takes among the positional ones (none: only
# by name): label, then options (selectbox, radio, pills…) or min, max and value (slider, number_input)
DEFAULTS = {"value": 3, "index": 2, "default": 2}
RANGED = ("slider", "number_input", "select_slider")


def test_no_keyed_input_is_given_a_default_as_well():
    """Issue 90: a lesson link set `ablation_other`, whose text box was drawn with value=…: Streamlit logged a warning
    with a stack on the server ("created with a default value but also had its value set via the Session State
    API"). A keyed input opens on its default through `session.start_at`, never through value=, index= or default=
    (a positional value of a slider or number box too)."""
    given = []
    for path in SOURCES:
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in INPUTS):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            if "key" not in kw:
                continue
            named = [a for a in DEFAULTS if a in kw and not (isinstance(kw[a], ast.Constant) and kw[a].value is None)]
            placed = node.func.attr in RANGED and len(node.args) > DEFAULTS["value"]
            if named or placed:
                given.append(f"{path.name}:{node.lineno} {node.func.attr} {named or 'value'}")
    assert not given, given


PAGES = ui_sources.PAGES  # each page's id -> its modules: `features/<id>/page.py`, its sections' pages, its parts
MAX_PAGE_LINES = 400  # the house's limit for a module outside the UI (house_check), every page module included


def _imported_features(path: Path) -> set[str]:
    """The `mha_viz.features` modules and names `path` imports (dotted, in full), function-local imports included."""
    found = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("mha_viz.features.")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mha_viz.features."):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def _other_pages(page: str, modules: set[str]) -> set[str]:
    """The features other than `page` that `modules` (dotted names) reach into."""
    return {m.split(".")[2] for m in modules if m.startswith("mha_viz.features.") and m.split(".")[2] != page}


def test_no_page_module_imports_another_feature():
    registered = set(catalogue.ids())  # navigation makes a page of each feature's record
    assert set(PAGES) == registered  # every page the app registers is checked, and no page file is orphaned
    planted = {"mha_viz.features.compare.run_b", "mha_viz.features.head_view.page", "mha_viz.ui.kit.charts"}
    assert _other_pages("head_view", planted) == {"compare"}  # a reach into another page is seen
    imports = {page: sorted(_other_pages(page, set().union(*map(_imported_features, files))))
               for page, files in PAGES.items()}
    assert not {page: others for page, others in imports.items() if others}, imports


def test_no_page_module_is_over_400_lines():
    """Every module of a page (`features/<id>/page.py` and the parts of its feature that read the UI, such as
    Compare's run B), the UI's kit and shell aside: the house's limit, which house_check does not apply under
    `mha_viz/ui`."""
    sizes = {p.relative_to(ui_sources.FEATURES).as_posix(): len(p.read_text().splitlines())
             for files in PAGES.values() for p in files}
    assert len(sizes) > len(PAGES) and all(files[0].name == "page.py" for files in PAGES.values())
    assert not {name: n for name, n in sizes.items() if n > MAX_PAGE_LINES}, sizes


def test_server_wide_caches_read_no_session():
    """analysis.py and steps.py hold caches shared by every session: what a result depends on comes
    in as arguments, never from the session or this rerun's state."""
    for name in ("kit/analysis.py", "shell/steps.py"):
        reads = [f"{name}:{node.lineno} {ast.unparse(node)}" for node in ast.walk(_tree(ROOT / "mha_viz" / "ui" / name))
                 if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                 and (node.value.id == "session" or (node.value.id == "state" and node.attr == "current"))]
        assert not reads, reads


ADMITTING = {"mha_viz/ui/kit/plans.py", "mha_viz/ui/kit/resources.py"}  # a plan run; a model's load (by count)


def _holds(tree: ast.AST) -> list[int]:
    """The lines of `tree` that take the server's admission: a call of `.hold(...)` on `slots()` or `slots`."""
    def slots(node: ast.AST) -> bool:
        node = node.func if isinstance(node, ast.Call) else node
        return (isinstance(node, ast.Name) and node.id == "slots") or (
            isinstance(node, ast.Attribute) and node.attr == "slots")
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "hold" and slots(node.func.value)]


def test_every_admission_reads_its_plan():
    """Issue 92: the server admits what a plan declares, in one place (`plans.run_admitted`), and a model's load; no
    page nor shell module takes a slot with a need worked out beside it. A hold planted in a page is found."""
    found = {p.relative_to(ROOT).as_posix(): lines for p in SOURCES if (lines := _holds(_tree(p)))}
    assert set(found) == ADMITTING and len(found["mha_viz/ui/kit/plans.py"]) == 1, found
    planted = ast.parse("def work():\n    with resources.slots().hold(need=need):\n        return compute()\n")
    assert _holds(planted) == [2] and _holds(ast.parse("slots = Slots()\nslots.hold()\n")) == [2]
