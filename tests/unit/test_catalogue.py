"""The features' records (`mha_viz.catalogue`): every list of pages is made from them, and a new page is its feature
folder, nothing else (docs/architecture.md's timed task). A feature planted in a temporary folder, its record and
its page module (`page.py`) in it, must show up in the pages' ids, the navigation's pages, the lessons'
checks, the notebook, the link parameters and the tests' headings; and no module of the app or the tests may list
the pages by hand."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from pathlib import Path

import pytest

import mha_viz
from mha_viz import catalogue
from mha_viz.export import lesson as lessons
from mha_viz.export.notebook_view import NotebookView

ROOT = Path(__file__).resolve().parents[2]
RECORD = '''
from mha_viz.catalogue import Feature
from mha_viz.export import view_params as vp
from mha_viz.export.notebook_view import code, md


def cells(v):
    return [md("## Planted"), code("figures.head(run, LAYER, HEAD)  # planted-recipe")]


def planted_figure(run):
    """A figure planted by tests/unit/test_catalogue.py: the public face must find it by its record."""


FEATURE = Feature("planted", "Planted page", "Measure", 15, ":material/star:", heading="A planted page",
                  notebook=cells, figures=(planted_figure,),
                  controls=(vp.flag("planted_flag"), *vp.local("an upload: no link carries a file", "planted_upload")))
'''
PAGE = '''
def planted_page():
    """A page planted by tests/unit/test_catalogue.py."""
'''


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A feature folder, its record and its page module, in a temporary folder on the features' path."""
    features = tmp_path / "features"
    (features / "planted").mkdir(parents=True)
    (features / "planted" / "__init__.py").write_text(RECORD)
    (features / "planted" / "page.py").write_text(PAGE)
    import mha_viz.features
    monkeypatch.setattr(catalogue, "FOLDERS", (*catalogue.FOLDERS, features))
    monkeypatch.setattr(mha_viz.features, "__path__", [*mha_viz.features.__path__, str(features)])
    catalogue.features.cache_clear()
    yield
    catalogue.features.cache_clear()
    for name in ("mha_viz.features.planted", "mha_viz.features.planted.page"):
        sys.modules.pop(name, None)
    monkeypatch.undo()
    for name in ("mha_viz.ui.kit.page_controls", "tests.helpers"):  # their lists made again without the planted page
        importlib.reload(importlib.import_module(name))


def test_the_records_are_one_per_page_in_sections_with_no_id_twice():
    found = catalogue.features()
    assert len(found) >= 18 and len(set(catalogue.ids())) == len(found)
    assert [catalogue.SECTIONS.index(f.section) for f in found] == sorted(
        catalogue.SECTIONS.index(f.section) for f in found)  # grouped by section, in the sections' order
    assert catalogue.retired() == {"whole_text": "head_view"}
    assert catalogue.feature("teaching").page_title != catalogue.feature("teaching").title  # its own heading
    assert catalogue.feature("head_view").page_title == "Head view"
    with pytest.raises(KeyError):
        catalogue.feature("no_such_page")
    icons = [f.icon for f in found]
    assert len(set(icons)) == len(icons), [i for i in icons if icons.count(i) > 1]  # each page told apart in the menu


def test_a_record_twice_or_in_no_section_is_refused():
    twice = [catalogue.Feature("a", "A", "Look", 1, ""), catalogue.Feature("a", "B", "Look", 2, "")]
    with pytest.raises(ValueError, match="twice"):
        catalogue.check(twice)
    with pytest.raises(ValueError, match="twice"):  # a retired id is an id too
        catalogue.check([catalogue.Feature("a", "A", "Look", 1, "", replaces=("b",)),
                         catalogue.Feature("b", "B", "Look", 2, "")])
    with pytest.raises(ValueError, match="section"):
        catalogue.check([catalogue.Feature("a", "A", "Elsewhere", 1, "")])


def test_a_figure_named_twice_in_the_face_is_refused(monkeypatch):
    from mha_viz import figures

    def head(run):
        """A feature's figure named as one of the kernel's."""

    def grid_of_a(run):
        """A feature's own figure."""

    a = catalogue.Feature("a", "A", "Look", 1, "", figures=(grid_of_a,))
    monkeypatch.setattr(catalogue, "features", lambda: (a,))
    assert figures.features_figures() == {"grid_of_a": grid_of_a}
    b = catalogue.Feature("b", "B", "Look", 2, "", figures=(grid_of_a,))
    monkeypatch.setattr(catalogue, "features", lambda: (a, b))
    with pytest.raises(ValueError, match="'grid_of_a' of the feature 'b'"):
        figures.features_figures()
    monkeypatch.setattr(catalogue, "features", lambda: (catalogue.Feature("c", "C", "Look", 1, "", figures=(head,)),))
    with pytest.raises(ValueError, match="'head' of the feature 'c'"):
        figures.features_figures()


@pytest.mark.usefixtures("planted")
def test_a_new_page_is_its_feature_folder():
    assert "planted" in catalogue.ids()
    ids = list(catalogue.ids())
    assert ids.index("planted") == ids.index("head_metrics") + 1  # Measure, order 15: after 10, before 20
    # the navigation's pages (made at the UI's import: built again here from the same records)
    from mha_viz.ui.shell import navigation as pages
    spec = {p.id: p for p in pages.specs()}["planted"]
    assert (spec.title, spec.section, spec.view.__name__) == ("Planted page", "Measure", "planted_page")
    # a lesson may name it
    raw = {"format": lessons.FORMAT, "version": lessons.VERSION, "title": "T", "steps": [
        {"page": "planted", "view": {"model": "minilm", "text": "a b", "layer": "0", "head": "0"}, "note": "Hi."}]}
    assert lessons.read_lesson(json.dumps(raw), pages=catalogue.ids()).steps[0].page == "planted"
    # its notebook recipe
    view = NotebookView(page="planted", model="minilm", text="A cat.", title="A planted page")
    cells = json.loads(mha_viz.view_notebook(view))["cells"]
    assert any("planted-recipe" in "".join(c["source"]) for c in cells)
    # the tests' headings
    helpers = importlib.reload(importlib.import_module("tests.helpers"))
    assert helpers.HEADINGS["planted"] == "A planted page"
    # its link parameters: what links and lesson steps carry
    page_controls = importlib.reload(importlib.import_module("mha_viz.ui.kit.page_controls"))
    assert [c.name for c in page_controls.BY_PAGE["planted"]] == ["planted_flag"]
    assert "planted_flag" in page_controls.CONTROLS
    # its input that no link carries: left out of links, by its own flag, not by a list of the kit's
    assert "planted_upload" in page_controls.NOT_CARRIED and "planted_upload" not in page_controls.CONTROLS
    assert "planted_flag" not in page_controls.NOT_CARRIED
    # its public figures: `mha_viz.figures` is made from the records
    from mha_viz import figures
    found = figures.features_figures()
    assert found["planted_figure"].__module__ == "mha_viz.features.planted"
    assert set(found) - {"planted_figure"} == set(figures.__all__) - set(figures.KERNEL)


def test_a_page_without_a_record_gets_the_model_grid_in_its_notebook():
    view = NotebookView(page="no_such_page", model="minilm", text="A cat.", title="Somewhere")
    cells = json.loads(mha_viz.view_notebook(view))["cells"]
    assert "figures.model_grid(run)" in "".join(cells[-1]["source"])


CONTAINERS = (ast.Tuple, ast.List, ast.Set, ast.Dict)


def _page_id_lists(path: Path) -> list[int]:
    """The lines of `path` where a literal tuple, list or set holds every page's id, or a dict maps every page's id
    to a name, a title or a function (a registry by hand; a dict of each page's own settings, literal containers,
    is the pages' data, not a list of them)."""
    every = set(catalogue.ids())
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict) and any(isinstance(v, CONTAINERS) for v in node.values):
            continue
        if isinstance(node, CONTAINERS):
            items = node.keys if isinstance(node, ast.Dict) else node.elts
            held = {k.value for k in items if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if every <= held:
                lines.append(node.lineno)
    return lines


def test_no_module_lists_the_pages_by_hand():
    planted = ROOT / "tests" / "unit" / "test_catalogue.py"
    hand = {str(p.relative_to(ROOT)): lines for folder in ("mha_viz", "tests", "models", "benchmarks")
            for p in sorted((ROOT / folder).rglob("*.py")) if p != planted and (lines := _page_id_lists(p))}
    hand |= {"app.py": lines} if (lines := _page_id_lists(ROOT / "app.py")) else {}
    assert not hand, hand


def test_the_check_finds_a_list_by_hand(tmp_path):
    listed = tmp_path / "listed.py"
    listed.write_text(f"PAGES = {tuple(catalogue.ids())!r}\nTITLES = {dict.fromkeys(catalogue.ids(), 't')!r}\n"
                      f"CONTROLS = {dict.fromkeys(catalogue.ids(), ())!r}\n")
    assert _page_id_lists(listed) == [1, 2]
