"""The app's features, each registered once by its own folder: `mha_viz/features/<id>/` holds `FEATURE`, a
`Feature` record (its id, title, section, place in the sidebar, icon and notebook recipe), and its page is
`<id>_page()` in its folder's `page.py`. Everything that lists the pages is generated from the records:
the pages' ids (links, lessons), the navigation, the pages' titles, the notebook recipes and the tests'
headings. Adding a page is its page file and its feature folder, nothing else.

The kernel knows no feature by name: `features()` finds the folders under `mha_viz/features/` and reads
their records (a plugin's discovery, as `mha_viz_models.families` registers model families), once."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

SECTIONS = ("Look", "Measure", "Teach & test", "About")  # the navigation's groups, in order
PACKAGE = "mha_viz.features"
FOLDERS: tuple[Path, ...] = (Path(__file__).parent / "features",)  # where the features' folders are found


@dataclass(frozen=True)
class Feature:
    """One feature of the app, as its page and its notebook show it.

    id: the page's id, which is also its URL path, what links and lessons name. title: the navigation's
    label; heading: the page's own title when it says more (else the title). section: one of SECTIONS;
    order: its place in the section. notebook: the cells that compute and draw what the page does
    (`mha_viz.view_notebook`; None: the model view's grid), and exact: whether they draw every
    figure of the page from the same arrays. replaces: the ids of retired pages whose parts moved here
    (an old link or lesson step naming one opens this page). controls: the page's own inputs, each a
    `view_params.Control` under its session key (`features/<id>/controls.py`): those that shape its view, which links
    and lessons carry, and the local ones that none carries, each saying why (`view_params.local`). summary: what
    the page shows, in a line (docs/using.md's list of pages, `pages_table`). figures: the functions from what
    `mha_viz` computes to a figure that this feature gives the public face `mha_viz.figures` (each documented, each
    returning the figure its page draws), found there by their names. picks_head: the page opens on a head of its
    own choosing when none was chosen (Compare: the head that changed most), so its links always write a chosen
    head."""

    id: str
    title: str
    section: str
    order: int
    icon: str
    heading: str = ""
    notebook: Callable | None = None  # (NotebookView) -> [(kind, source)]: `mha_viz.export.notebook_view`
    exact: bool = False
    replaces: tuple[str, ...] = ()
    controls: tuple = ()  # its own inputs (`export.view_params.Control`s): carried by links, or local
    summary: str = ""
    figures: tuple[Callable, ...] = ()  # its public figures: `mha_viz.figures.<name>`
    picks_head: bool = False

    @property
    def page_title(self) -> str:
        return self.heading or self.title


def check(found: list[Feature]) -> None:
    """Refuse an id registered twice (a retired page's id counts) and a section not in SECTIONS."""
    ids = [f.id for f in found]
    retired = [old for f in found for old in f.replaces]
    clash = {i for i in ids + retired if (ids + retired).count(i) > 1}
    if clash:
        raise ValueError(f"feature ids registered twice: {sorted(clash)}")
    unknown = [f.id for f in found if f.section not in SECTIONS]
    if unknown:
        raise ValueError(f"features in no section of {SECTIONS}: {unknown}")


@functools.cache
def features() -> tuple[Feature, ...]:
    """Every feature's record, in the navigation's order (section, then order). Found once; two sessions
    asking at once get equal tuples (imports are locked, the records frozen)."""
    found = []
    for info in pkgutil.iter_modules([str(folder) for folder in FOLDERS]):
        record = getattr(importlib.import_module(f"{PACKAGE}.{info.name}"), "FEATURE", None)
        if not isinstance(record, Feature):
            raise TypeError(f"{PACKAGE}.{info.name} holds no FEATURE record")
        found.append(record)
    check(found)
    return tuple(sorted(found, key=lambda f: (SECTIONS.index(f.section), f.order, f.id)))


def pages_table() -> str:
    """docs/using.md's list of the pages, made from the records: each section's pages in the navigation's order,
    each with its title, its id (its URL path) and its summary."""
    lines = []
    for section in SECTIONS:
        lines.append(f"- **{section}**")
        lines += [f"  - **{f.title}** (`/{f.id}`): {f.summary}" for f in features() if f.section == section]
    return "\n".join(lines)


def features_table() -> str:
    """docs/architecture.md's table of the features, made from the records and their folders: each feature's folder,
    title and section, the modules in its folder, the controls links carry (by parameter), and its public figures
    (`mha_viz.figures.<name>`)."""
    rows = ["| folder | feature | section | its modules | carried by links | its figures |",
            "|---|---|---|---|---|---|"]
    for f in features():
        folder = next(base / f.id for base in FOLDERS if (base / f.id).is_dir())
        modules = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.py") if p.name != "__init__.py")
        carried = [c.link_name for c in f.controls if c.carried]
        rows.append(f"| `features/{f.id}/` | {f.title} | {f.section} | {', '.join(f'`{m}`' for m in modules)} | "
                    f"{', '.join(f'`{c}`' for c in carried) or '—'} | "
                    f"{', '.join(f'`{fn.__name__}`' for fn in f.figures) or '—'} |")
    return "\n".join(rows)


def link_controls() -> dict:
    """Every page's controls that links and lesson steps carry, by link parameter (`Control.link_name`): the
    parameters a link may hold beyond its own (model, text, head…), made from the records. A control two pages
    share (the pair of the prediction's and the circuit's pages) is one entry."""
    return {c.link_name: c for f in features() for c in f.controls if c.carried}


def ids() -> tuple[str, ...]:
    """The pages' ids (their URL paths), in the navigation's order."""
    return tuple(f.id for f in features())


def feature(page: str) -> Feature:
    """The record of the page with id `page` (KeyError for an unknown id)."""
    for f in features():
        if f.id == page:
            return f
    raise KeyError(page)


def retired() -> dict[str, str]:
    """{a retired page's id: the page its parts moved to}: what an old link or a lesson step may still name."""
    return {old: f.id for f in features() for old in f.replaces}


def with_retired(page_ids) -> list[str]:
    """`page_ids` and every retired page whose successor is among them: what a lesson may name (its step
    opens on the successor)."""
    page_ids = list(page_ids)
    return page_ids + [old for old, new in retired().items() if new in page_ids and old not in page_ids]

