"""A feature is one folder (issue 92): the files outside `mha_viz/features/<id>/` that import a feature, or name it in
any text (a path in a docstring), counted for every feature: 0. Its page is in its folder (`page.py`), and the
public face `mha_viz.figures` gathers the features' figures from their records (`Feature.figures`); a file outside
that imports a feature fails the test. The UI's kit and shell name none; the shell opens a page by its record's
id."""

from __future__ import annotations

import ast
import re
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


def files_naming_features(files: dict[str, str]) -> dict[str, list[str]]:
    """For every feature (a folder under mha_viz/features/), the files outside its folder whose text names it as
    `features/<id>` or `features.<id>` (an import, a path in a docstring): a feature is one folder, so the count
    is 0 for each. `files` maps a path relative to the root to its text; the features are the folders it shows."""
    ids = {m.group(1) for rel in files for m in [re.match(r"mha_viz/features/([a-z_0-9]+)/", rel)] if m}
    found: dict[str, list[str]] = {}
    for rel, text in files.items():
        for fid in ids:
            if rel.startswith(f"mha_viz/features/{fid}/"):
                continue
            if re.search(rf"\bfeatures[./]{fid}\b", text):
                found.setdefault(fid, []).append(rel)
    return {fid: sorted(rels) for fid, rels in sorted(found.items())}


def _package_files() -> dict[str, str]:
    paths = [*sorted(ROOT.rglob("*.py")), ROOT.parent / "app.py"]
    return {p.relative_to(ROOT.parent).as_posix(): p.read_text(encoding="utf-8") for p in paths}


def test_no_file_outside_a_features_folder_names_it():
    found = files_naming_features(_package_files())
    assert not found, "\n".join(f"{fid}: {', '.join(rels)}" for fid, rels in found.items())


def test_a_planted_name_of_a_feature_outside_its_folder_is_found():
    files = {"mha_viz/features/qk/page.py": "from mha_viz.features.qk import figures\n",
             "mha_viz/features/qk_more/page.py": "",
             "mha_viz/drawing/style.py": '"""Drawn by the page (`features/qk_more/figures`)."""\n',
             "mha_viz/ui/kit/keys.py": "X = 'features.qkx'\n"}
    assert files_naming_features(files) == {"qk_more": ["mha_viz/drawing/style.py"]}
    files["mha_viz/features/qk_more/page.py"] = "from mha_viz.features.qk.figures import f\n"
    assert files_naming_features(files) == {"qk": ["mha_viz/features/qk_more/page.py"],
                                            "qk_more": ["mha_viz/drawing/style.py"]}
