"""The pages made from the features' records and the UI's module layout: each page `x` is drawn by `x_page()` in
`mha_viz/features/x/page.py`, every page module has a record, every page draws its record's heading (the app tests
check it as drawn: tests/helpers.HEADINGS, which tests/app's `open_page` reads), and no two public functions of
the UI share a name."""

from __future__ import annotations

import ast
import importlib

from mha_viz.ui.shell import navigation as pages
from tests.helpers import HEADINGS
from tests.ui_sources import FEATURES, MODULES, PAGES, page_module


def test_each_page_is_drawn_by_the_function_of_its_own_module():
    for spec in pages.PAGES:
        assert spec.view.__name__ == f"{spec.id}_page", spec
        assert spec.view.__module__ == f"mha_viz.features.{spec.id}.page", spec
        assert getattr(importlib.import_module(spec.view.__module__), spec.view.__name__) is spec.view


def test_every_page_module_is_registered_and_nothing_else_is_named_like_one():
    modules = sorted(p.parent.name for p in FEATURES.glob("*/page.py"))
    assert modules == sorted(PAGES) == sorted(p.id for p in pages.PAGES)
    deeper = sorted(p.relative_to(FEATURES).as_posix() for p in FEATURES.glob("*/*/**/page.py"))
    assert deeper == [], deeper  # a feature has one page: a page too long for 400 lines is two features


def test_every_registered_page_has_a_heading_the_tests_know_and_draws_its_own():
    assert set(HEADINGS) == {p.id for p in pages.PAGES}
    assert len(pages.BY_ID) == len(pages.PAGES) and pages.DEFAULT in pages.BY_ID
    for spec in pages.PAGES:
        source = page_module(spec.id).read_text()
        # its title is its record's (view_helpers.start, or catalogue.feature, given its own id)
        assert f'start("{spec.id}"' in source or f'start_on_model("{spec.id}"' in source \
            or f'start_on_pair("{spec.id}"' in source \
            or f'catalogue.feature("{spec.id}")' in source, spec.id


def test_no_two_public_functions_of_the_ui_share_a_name():
    seen: dict[str, list[str]] = {}
    for path in MODULES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                seen.setdefault(node.name, []).append(path.relative_to(FEATURES.parents[1]).as_posix())
    shared = {name: mods for name, mods in seen.items() if len(mods) > 1}
    assert len(seen) > 100 and not shared, shared
