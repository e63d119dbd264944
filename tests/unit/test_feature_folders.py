"""A feature is one folder (issue 92): the files outside `mha_viz/features/<id>/` that import a feature, counted for
every feature: 0. Its page is in its folder (`page.py`), and the public face `mha_viz.figures` gathers the features'
figures from their records (`Feature.figures`); a file outside that imports a feature fails the test. The UI's kit
and shell name none; the shell opens a page by its record's id."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "mha_viz"
FEATURES = sorted(p.name for p in (ROOT / "features").iterdir() if (p / "__init__.py").is_file())
OUTSIDE: dict[str, set[str]] = {}  # no file outside a feature's folder names it: the face reads the records


def imported_features(source: str) -> set[str]:
    """The features a module's source imports (`mha_viz.features.<id>…`, function-local imports included)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["mha_viz", "features"] and len(parts) > 2 and parts[2] in FEATURES:
                found.add(parts[2])
    return found


def outside_files() -> dict[str, set[str]]:
    """feature -> the files outside its folder that import it."""
    out = {f: set() for f in FEATURES}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        for f in imported_features(path.read_text()):
            if rel.parts[:2] != ("features", f):
                out[f].add(rel.as_posix())
    return out


def test_the_reader_finds_a_planted_import():
    assert imported_features("from mha_viz.features.focus import controls as k\n") == {"focus"}
    assert imported_features("def f():\n    import mha_viz.features.qk.figures\n") == {"qk"}
    assert imported_features("from mha_viz.features import catalogue_like\nfrom mha_viz import figures\n") == set()


def test_no_feature_is_named_outside_its_folder():
    out = outside_files()
    assert {f: files for f, files in out.items() if files} == OUTSIDE
    counts = {f: len(files) for f, files in out.items()}
    print("files outside each feature's folder that import it:", counts, "total", sum(counts.values()))


def test_the_kit_and_the_shell_import_no_feature():
    for folder in ("kit", "shell"):
        for path in (ROOT / "ui" / folder).rglob("*.py"):
            assert not imported_features(path.read_text()), path
