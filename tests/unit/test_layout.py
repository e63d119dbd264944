"""The test suite's own layout: every test file in a tier folder, the tiers registered as markers,
unit tests free of models and of the app, and no test module importing another one (shared code
lives in conftest.py files and the helpers modules)."""

from __future__ import annotations

import ast
import tomllib

from tests.helpers import MODEL_FIXTURES, ROOT, TIERS

TESTS = ROOT / "tests"
TEST_FILES = sorted(TESTS.rglob("test_*.py"))


def _tree(path):
    return ast.parse(path.read_text(), filename=str(path))


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def test_every_test_file_is_in_a_tier_folder_and_the_tiers_are_markers():
    assert TEST_FILES
    for path in TEST_FILES:
        tier = path.relative_to(TESTS).parts[0]
        assert tier in TIERS, f"{path.relative_to(ROOT)} is not in tests/{{{','.join(TIERS)}}}"
    for tier in TIERS:
        assert (TESTS / tier / "__init__.py").exists(), f"tests/{tier} needs __init__.py (shared basenames)"
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {m.split(":")[0] for m in pytest_options["markers"]}
    assert set(TIERS) | {"model"} <= registered
    assert pytest_options["testpaths"] == ["tests"]


def test_no_test_module_imports_another():
    wrong = []
    for path in TEST_FILES:
        for name in _imported(_tree(path)) - {".conftest"}:  # e2e's tests share its conftest's helpers
            last = name.rsplit(".", 1)[-1]
            if last.startswith("test_") or last == "conftest":
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "shared code goes to a conftest.py or a helpers module: " + "; ".join(wrong)


def test_unit_tests_use_no_model_and_no_app():
    wrong = []
    for path in sorted((TESTS / "unit").rglob("test_*.py")):
        tree = _tree(path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = {a.arg for a in node.args.args + node.args.kwonlyargs} & MODEL_FIXTURES
                if params:
                    wrong.append(f"{path.name}:{node.lineno} {node.name} takes {sorted(params)}")
            if isinstance(node, ast.Attribute) and node.attr == "getfixturevalue":
                wrong.append(f"{path.name}:{node.lineno} asks for a fixture by name")
        wrong += [f"{path.name} imports {name}" for name in _imported(tree)
                  if name.startswith(("streamlit.testing", "tests.app"))]
    assert not wrong, "; ".join(wrong)
