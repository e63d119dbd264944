"""The package's face (issues 38 and 53): about 20 names for a user's tasks, the rest in one namespace a feature,
the old top-level names working for one release with a warning that names their place. docs/api.md lists every
name of `mha_viz.__all__` exactly once, in
its table of names (one row a name, no row for anything else; the code blocks may use a name as often
as they need); every `mha_viz.…` reference and every import from mha_viz in its code blocks resolves,
and so does every attribute the blocks read off a module they imported; the names issue 38 asks for
are reachable as `mha_viz.NAME` or in their namespace; and one public function is called `analyze`."""

from __future__ import annotations

import ast
import importlib
import re

import pytest

import mha_viz
from tests.helpers import ROOT

API = ROOT / "docs" / "api.md"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
TABLE_TITLE = "## Every name of `mha_viz`"
ROW = re.compile(r"^\| `mha_viz\.(\w+)` \|", re.M)
# issue 53, item 3: the face holds the names of a user's tasks (load, analyze, scan or the run, tokenize, the head
# table, patching, circuits, corpus, notebook; figures is `mha_viz.figures`), each called on the API page
FACE_TASKS = ("load_model", "analyze", "scan", "tokenize", "head_table", "generate", "compare", "direct_logit",
              "estimate_heads", "patch_heads", "edge_attribution", "circuit", "head_statistics", "view_notebook",
              "html_report")
# issue 38's names that moved to a feature's namespace, which the page calls there
MOVED_TASKS = ("overview", "value_weighted", "estimate_positions", "head_examples")
UI_SUPPORT = ("BUNDLED", "HUB_SUGGESTIONS", "PRECISIONS", "emulated_note", "session_cap")


def _resolve(dotted: str):
    """The object `dotted` names (a.b.c: attributes, importing modules on the way), or AttributeError."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if not hasattr(obj, part):
            try:  # a submodule that nothing imported yet
                obj = importlib.import_module(".".join(parts[: i + 1]))
                continue
            except ModuleNotFoundError:
                raise AttributeError(f"{dotted}: no {part} in {'.'.join(parts[:i])}") from None
        obj = getattr(obj, part)
    return obj


def _blocks() -> list[str]:
    return FENCE.findall(API.read_text())


def _table_names() -> list[str]:
    """The names of the table's rows, in order (the table runs from its heading to the next heading)."""
    text = API.read_text()
    assert TABLE_TITLE in text, f"docs/api.md has no section {TABLE_TITLE!r}"
    section = text.split(TABLE_TITLE, 1)[1].split("\n#", 1)[0]
    return ROW.findall(section)


def _references(code: str) -> list[str]:
    """Every dotted name a code block reads from mha_viz: `mha_viz.a.b` written out, the names its
    `from mha_viz… import` lines import, and `alias.attr` for each module or class so imported."""
    found = re.findall(r"\bmha_viz(?:\.\w+)+", code)
    aliases: dict[str, str] = {}
    for line in code.splitlines():  # each import line on its own: the blocks are fragments, not programs
        try:
            tree = ast.parse(line.strip())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mha_viz":
                for alias in node.names:
                    found.append(f"{node.module}.{alias.name}")
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for alias, dotted in aliases.items():
        found += [dotted + attr for attr in re.findall(rf"(?<![\w.]){alias}((?:\.[A-Za-z_]\w*)+)", code)]
    return found


def test_every_name_of_the_package_has_exactly_one_row():
    names = _table_names()
    assert names, "the table of names is empty"
    doubled = sorted({n for n in names if names.count(n) > 1})
    assert not doubled, f"listed more than once: {doubled}"
    public = set(mha_viz.__all__)
    assert len(public) == len(mha_viz.__all__), "__all__ names a name twice"
    assert not public - set(names), f"in mha_viz.__all__ but not in docs/api.md's table: {sorted(public - set(names))}"
    assert not set(names) - public, f"in the table but not in mha_viz.__all__: {sorted(set(names) - public)}"
    for name in names:
        getattr(mha_viz, name)


def test_every_reference_in_the_code_blocks_resolves():
    blocks = _blocks()
    assert len(blocks) >= 5
    refs = sorted({ref for block in blocks for ref in _references(block)})
    assert "mha_viz.analyze" in refs and "mha_viz.metrics.head_similarity" in refs  # the parser reads both forms
    broken = []
    for ref in refs:
        try:
            _resolve(ref)
        except (AttributeError, ImportError) as exc:
            broken.append(f"{ref} ({exc})")
    assert not broken, "docs/api.md names what does not exist:\n" + "\n".join(broken)


def test_the_parser_finds_what_is_broken():
    """Planted: a stale import, a stale attribute of an imported module, a stale top-level name."""
    code = ("from mha_viz import cross_metrics\nfrom mha_viz.views import qk\nqk.neuron(w, 1, 2); qk.nothing_here(w)\n"
            "mha_viz.not_a_name(run)\n")
    refs = _references(code)
    assert {"mha_viz.cross_metrics", "mha_viz.views.qk.neuron", "mha_viz.views.qk.nothing_here",
            "mha_viz.not_a_name"} <= set(refs)
    unresolved = set()
    for ref in refs:
        try:
            _resolve(ref)
        except (AttributeError, ImportError):
            unresolved.add(ref)
    assert unresolved == {"mha_viz.cross_metrics", "mha_viz.views.qk.nothing_here", "mha_viz.not_a_name"}


@pytest.mark.parametrize("name", FACE_TASKS)
def test_the_faces_tasks_are_the_packages(name):
    assert name in mha_viz.__all__ and callable(getattr(mha_viz, name))
    called = f"mha_viz.{name}(" in "\n".join(_blocks())
    assert called, f"docs/api.md never calls mha_viz.{name}"


def test_the_face_is_about_twenty_names_without_the_apps_support():
    assert len(mha_viz.__all__) <= 22, mha_viz.__all__
    assert not set(UI_SUPPORT) & set(mha_viz.__all__)
    assert not set(mha_viz.MOVED) & set(mha_viz.__all__), "a name both on the face and moved"


@pytest.mark.parametrize("name", MOVED_TASKS)
def test_a_moved_task_is_called_in_its_namespace_on_the_api_page(name):
    new = mha_viz.moved_to(name)
    assert new.startswith("mha_viz.") and new.count(".") == 2, new  # one namespace a feature
    assert f"{new}(" in "\n".join(_blocks()), f"docs/api.md never calls {new}"


def test_an_old_name_still_works_for_one_release_and_says_where_it_went():
    for name in mha_viz.MOVED:
        new = mha_viz.moved_to(name)
        with pytest.warns(DeprecationWarning, match=re.escape(f"mha_viz.{name} moved to {new}")):
            old = getattr(mha_viz, name)
        assert old is _resolve(new), name
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        mha_viz.not_a_name  # noqa: B018 - the lookup is what is tested
    assert mha_viz.effective.effective_attention is _resolve("mha_viz.effective.effective_attention")  # a namespace


def test_the_code_reads_no_old_name():
    """The package, its tests and its benchmarks use the names where they live now: no `mha_viz.OLD`."""
    old = re.compile(r"(?<![\w.])mha_viz\.(" + "|".join(mha_viz.MOVED) + r")\b(?!\.py)")
    found = []
    for path in sorted([*(ROOT / "mha_viz").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"), ROOT / "app.py",
                        *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]):
        if path == ROOT / "mha_viz" / "__init__.py":
            continue
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in old.finditer(path.read_text())]
    assert not found, found


def test_one_public_function_is_called_analyze():
    """`analyze` is mha_viz.analyze alone: no other module of the package defines a public `analyze`."""
    defined = []
    for path in sorted((ROOT / "mha_viz").rglob("*.py")):
        tree = ast.parse(path.read_text())
        defined += [str(path.relative_to(ROOT)) for node in tree.body
                    if isinstance(node, ast.FunctionDef) and node.name in ("analyze", "analyse")]
    assert defined == ["mha_viz/analyze_text.py"], defined
    assert mha_viz.analyze.__module__ == "mha_viz.analyze_text"


def test_no_namespace_hides_one_of_its_modules_behind_a_name():
    """A namespace that exported a name its own module has (`circuits.qk_terms`, a function and a module) would
    hand the function to `from mha_viz.circuits import qk_terms as module`: every exported name is not a module's."""
    import pkgutil

    found = []
    for info in pkgutil.iter_modules(mha_viz.__path__):
        if not info.ispkg or info.name == "ui":
            continue
        package = importlib.import_module(f"mha_viz.{info.name}")
        modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
        found += [f"mha_viz.{info.name}.{name}" for name in getattr(package, "__all__", ()) if name in modules]
    assert not found, found
