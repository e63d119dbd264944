"""The house rules on imports and sizes, read from the source with `ast`: no import cycle among the
modules of mha_viz and mha_viz_models (an import inside a function counts: it runs too), no core
module over 400 lines, mha_viz_models never imports mha_viz, and only app.py, mha_viz/ui and the features' pages
import streamlit. Each rule is a function of the modules' sources, also shown to catch a planted breach."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"mha_viz": ROOT / "mha_viz", "mha_viz_models": ROOT / "models" / "mha_viz_models"}
MAX_CORE_LINES = 400  # the UI is not core: its page modules have their own limit
UI = "mha_viz.ui"


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = [package, *path.relative_to(folder).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def first_party() -> dict[str, Path]:
    """Every module of both packages by its import name (a package by its __init__.py)."""
    return {_module_name(package, folder, path): path
            for package, folder in PACKAGES.items() for path in sorted(folder.rglob("*.py"))}


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported_names(name: str, is_package: bool, tree: ast.AST) -> set[str]:
    """Every dotted name an import anywhere in the module (top level, functions, branches) may load:
    `import a.b` gives a.b; `from a.b import c` gives a.b and a.b.c (c may be a module or a name);
    relative imports are resolved against the module's own package."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the first-party modules it imports, from {module: (source, is a package)}. A name
    that is not a module stands for the deepest module that holds it (`from mha_viz.metrics import
    head_table`: the package mha_viz.metrics). A module's own packages are left out: Python runs
    them before it whatever it imports, so they are not an edge this module adds."""
    graph: dict[str, set[str]] = {}
    for name, (source, is_package) in sources.items():
        targets = set()
        for target in imported_names(name, is_package, ast.parse(source)):
            while target and target not in sources:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                targets.add(target)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module, and modules
    that import themselves (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    found.append(sorted(component))
    return found


def _sources() -> dict[str, tuple[str, bool]]:
    return {name: (path.read_text(), _is_package(path)) for name, path in first_party().items()}


def test_the_packages_are_found():
    modules = first_party()
    assert {"mha_viz", "mha_viz.metrics.head_stats", "mha_viz.ui.shell.main", "mha_viz_models",
            "mha_viz_models.attention.mha"} <= set(modules)


def test_no_import_cycles():
    found = cycles(import_graph(_sources()))
    assert not found, "import cycles:\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_a_planted_cycle_through_a_function_local_import_is_found():
    sources = {
        "pkg": ("from pkg.a import f\n", True),
        "pkg.a": ("from pkg import b\n\ndef f():\n    return b.g()\n", False),
        "pkg.b": ("def g():\n    from pkg.a import f  # function-local: still an import\n    return f\n", False),
        "pkg.c": ("import pkg.a\nfrom pkg import d\n", False),
        "pkg.d": ("from . import c\n", False),  # relative: pkg.c
        "pkg.e": ("from pkg import a\n", False),  # imports into a cycle, is not part of one
    }
    graph = import_graph(sources)
    assert graph["pkg.b"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    sources["pkg.b"] = ("def g():\n    return 1\n", False)
    assert cycles(import_graph(sources)) == [["pkg.c", "pkg.d"]]


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between folders one level under each package (mha_viz.capture,
    mha_viz_models.attention; a module at a package's top is its own node, the package faces are
    left out): folder A → folder B when a module of A imports one of B."""
    def folder(module: str) -> str | None:
        parts = module.split(".")
        return ".".join(parts[:2]) if len(parts) >= 2 else None

    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if (source := folder(module)) is None:
            continue
        folders.setdefault(source, set()).update(
            t for t in map(folder, targets) if t is not None and t != source)
    return folders


def test_no_folder_cycles():
    found = cycles(folder_graph(import_graph(_sources())))
    assert not found, "folder cycles:\n" + "\n".join(" ↔ ".join(c) for c in found)


def test_a_planted_folder_cycle_is_found_though_no_module_cycle_is():
    sources = {
        "pkg": ("", True),
        "pkg.low": ("", True),
        "pkg.low.a": ("def f():\n    return 1\n", False),
        "pkg.low.b": ("from pkg.high.c import g\n", False),  # low imports high ...
        "pkg.high": ("", True),
        "pkg.high.c": ("def g():\n    return 2\n", False),
        "pkg.high.d": ("from pkg.low.a import f\n", False),  # ... and high imports low
        "pkg.top": ("from pkg.high import d\n", False),
    }
    graph = import_graph(sources)
    assert cycles(graph) == []
    assert cycles(folder_graph(graph)) == [["pkg.high", "pkg.low"]]
    sources["pkg.low.b"] = ("def h():\n    return 3\n", False)
    assert cycles(folder_graph(import_graph(sources))) == []


def oversized(sources: dict[str, str], limit: int = MAX_CORE_LINES) -> list[str]:
    """The core modules (not the UI) longer than `limit` lines, with their length."""
    return [f"{name} ({n} lines)" for name, text in sorted(sources.items())
            if not (name == UI or name.startswith(UI + ".")) and (n := len(text.splitlines())) > limit]


def test_no_core_module_over_400_lines():
    big = oversized({name: source for name, (source, _) in _sources().items()})
    assert not big, big


def test_a_planted_long_module_is_found_and_the_ui_is_not_core():
    long = "x = 1\n" * (MAX_CORE_LINES + 1)
    sources = {"mha_viz.views.detail": long, "mha_viz.ui.shell.sidebar": long, "mha_viz.text.tokenize": "x = 1\n" * 400}
    assert oversized(sources) == [f"mha_viz.views.detail ({MAX_CORE_LINES + 1} lines)"]


def layer_breaches(files: dict[str, str]) -> list[str]:
    """From {path relative to the root: source}: files of models/ that import mha_viz, and files
    outside app.py, mha_viz/ui/ and a feature's page (`mha_viz/features/<id>/page.py`, one a feature: a
    module deeper in its folder is not its page) that import streamlit."""
    breaches = []
    for rel, source in sorted(files.items()):
        dotted = rel.removesuffix(".py").replace("/", ".")  # relative imports resolve within its folder
        tops = {name.split(".")[0] for name in imported_names(dotted, False, ast.parse(source)) if name}
        if rel.startswith("models/") and "mha_viz" in tops:
            breaches.append(f"{rel} imports mha_viz (mha_viz_models must stand alone)")
        page = re.fullmatch(r"mha_viz/features/[^/]+/page\.py", rel) is not None
        if "streamlit" in tops and not (rel == "app.py" or rel.startswith("mha_viz/ui/") or page):
            breaches.append(f"{rel} imports streamlit (only app.py, mha_viz/ui and a feature's page may)")
    return breaches


def test_mha_viz_models_never_imports_mha_viz_and_only_the_ui_and_the_pages_import_streamlit():
    files = {p.relative_to(ROOT).as_posix(): p.read_text()
             for p in [ROOT / "app.py", *sorted((ROOT / "mha_viz").rglob("*.py")),
                       *sorted((ROOT / "models").rglob("*.py"))]}
    assert "models/mha_viz_models/attention/mha.py" in files and "mha_viz/ui/shell/main.py" in files
    breaches = layer_breaches(files)
    assert not breaches, breaches


def test_planted_layer_breaches_are_found():
    files = {
        "app.py": "import streamlit as st\n",
        "mha_viz/ui/shell/sidebar.py": "import streamlit as st\n",
        "mha_viz/views/detail.py": "def draw():\n    import streamlit.components.v1\n",
        "mha_viz/features/qk/page.py": "import streamlit as st\n",
        "mha_viz/features/prediction/task/page.py": "import streamlit as st\n",
        "mha_viz/features/qk/figures.py": "import streamlit as st\n",
        "mha_viz/features/qk/parts.py": "def draw():\n    import streamlit as st\n",
        "models/mha_viz_models/attention/heads.py": "def f():\n    from mha_viz.metrics import head_table\n",
        "models/mha_viz_models/loading/loader.py": "import mha_viz_models.errors\n",
    }
    assert layer_breaches(files) == [
        "mha_viz/features/prediction/task/page.py imports streamlit (only app.py, mha_viz/ui and a feature's page may)",
        "mha_viz/features/qk/figures.py imports streamlit (only app.py, mha_viz/ui and a feature's page may)",
        "mha_viz/features/qk/parts.py imports streamlit (only app.py, mha_viz/ui and a feature's page may)",
        "mha_viz/views/detail.py imports streamlit (only app.py, mha_viz/ui and a feature's page may)",
        "models/mha_viz_models/attention/heads.py imports mha_viz (mha_viz_models must stand alone)",
    ]


FEATURES = "mha_viz.features"
# the features and the figures' face over them; the UI's kit and shell, which the pages import, name no feature (the
# shell opens a page by its record's id)
ABOVE_THE_KERNEL = (FEATURES, "mha_viz.figures")


def feature_breaches(graph: dict[str, set[str]]) -> list[str]:
    """Imports that break the rooms' order between the kernel and the features: a feature's folder importing
    another feature's (a feature is one folder), or any other module (the kernel, the UI's kit and shell: all of
    mha_viz but the package's face, the features and `mha_viz.figures`) importing a feature."""
    def feature(module: str) -> str | None:
        parts = module.split(".")
        return ".".join(parts[:3]) if module.startswith(FEATURES + ".") and len(parts) > 2 else None

    found = set()
    for module, targets in graph.items():
        if not module.startswith("mha_viz.") or module == FEATURES:
            continue
        own = feature(module)
        kernel = not module.startswith(ABOVE_THE_KERNEL)
        for other in map(feature, targets):
            if other is not None and other != own and (kernel or own is not None):
                found.add(f"{module} imports {other}")
    return sorted(found)


def test_no_feature_imports_another_and_the_kernel_imports_none():
    found = feature_breaches(import_graph(_sources()))
    assert not found, "\n".join(found)


def test_planted_feature_breaches_are_found():
    sources = {
        "mha_viz": ("", True), "mha_viz.features": ("", True),
        "mha_viz.features.a": ("", True), "mha_viz.features.a.figures": ("from mha_viz.drawing import style\n", False),
        "mha_viz.features.b": ("", True), "mha_viz.features.b.figures": ("", False),
        "mha_viz.drawing": ("", True), "mha_viz.drawing.style": ("", False),
        "mha_viz.figures": ("from mha_viz.features.a import figures\n", True),  # the face may
        "mha_viz.features.b.page": ("from mha_viz.features.b import figures\nfrom mha_viz.ui import kit\n", False),
        "mha_viz.ui": ("", True), "mha_viz.ui.kit": ("", False),
    }
    assert feature_breaches(import_graph(sources)) == []
    sources["mha_viz.ui.kit"] = ("from mha_viz.features.b import figures\n", False)  # the UI may not
    assert feature_breaches(import_graph(sources)) == ["mha_viz.ui.kit imports mha_viz.features.b"]
    sources["mha_viz.ui.kit"] = ("", False)
    sources["mha_viz.features.b.figures"] = ("from mha_viz.features.a.figures import f\n", False)
    sources["mha_viz.drawing.style"] = ("def f():\n    from mha_viz.features.b import figures\n", False)
    assert feature_breaches(import_graph(sources)) == [
        "mha_viz.drawing.style imports mha_viz.features.b",
        "mha_viz.features.b.figures imports mha_viz.features.a"]

