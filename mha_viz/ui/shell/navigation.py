"""The app's pages, made from the features' records (`mha_viz.catalogue`: id, title, icon, section), each drawn
by `<id>_page()` in the feature's page module `mha_viz.features.<id>.page` (`features/<id>/page.py`).

`navigation()` turns them into `st.navigation`'s sections; a view asks for another page
with `keys.GOTO` (e.g. `shared_head.open_head`), and `follow_goto()` switches at the start of the
next run, so views never need to know where a page lives. A retired page's id (`catalogue.retired()`: an
old link's path, a lesson's step) opens the page its parts moved to.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import streamlit as st

from mha_viz import catalogue
from mha_viz.ui.kit import keys, resources, session


@dataclass(frozen=True)
class PageSpec:
    id: str  # also the page's URL path
    title: str
    icon: str
    section: str
    view: Callable[[], None]  # its controls keep their values across visits (persist_state=keys.KEEP)


SECTIONS = catalogue.SECTIONS


def _view(feature: catalogue.Feature) -> Callable[[], None]:
    """The function that draws `feature`'s page: `<id>_page()` in `mha_viz.features.<id>.page`, imported here by
    name (the shell names no feature: the records do)."""
    return getattr(importlib.import_module(f"mha_viz.features.{feature.id}.page"), f"{feature.id}_page")


def specs() -> tuple[PageSpec, ...]:
    """A page for every feature's record (`catalogue.features()`), in the navigation's order."""
    return tuple(PageSpec(f.id, f.title, f.icon, f.section, _view(f)) for f in catalogue.features())


PAGES = specs()
BY_ID = {p.id: p for p in PAGES}
RETIRED = catalogue.retired()
DEFAULT = "model_view"


def offered() -> tuple[PageSpec, ...]:
    """The pages this server offers: every page, or in a workshop (`resources.workshop`) the lesson's."""
    lesson = resources.workshop()
    return PAGES if lesson is None else tuple(p for p in PAGES if p.id in lesson.pages)


def lesson_ids() -> list[str]:
    """What a lesson's steps may name here: the pages offered, and the retired ones that open on one of them."""
    return catalogue.with_retired(p.id for p in offered())


def _default(shown: tuple[PageSpec, ...]) -> str:
    """The default page's id: DEFAULT, or the first page offered without it (a workshop)."""
    return DEFAULT if any(p.id == DEFAULT for p in shown) else shown[0].id


# The default page is served at the root, yet Streamlit keeps its url_path to itself (its page hash) and answers that
# path with "Page not found": its own path is this one, which no link names, and the page's id, where every other page
# is (`/head_view`), is a hidden page that leaves for the root at once, as an old link does (`navigation`).
ROOT_PATH = "_root"


def _page(spec: PageSpec, default: str):
    first = spec.id == default
    return st.Page(spec.view, title=spec.title, icon=spec.icon, url_path=ROOT_PATH if first else spec.id, default=first)


def navigation():
    """`st.navigation` over the pages offered, grouped by section, at the top of the page: the
    sidebar starts with the model and the sentence box, where a person starts (st.Page needs a
    running script, so the page objects are made on each run from the one registry)."""
    shown = offered()
    default = _default(shown)
    ids = {p.id for p in shown}
    # an old link's path, and the default page's id (`ROOT_PATH`): hidden pages that leave for the page they name
    leaving = {**{old: new for old, new in RETIRED.items() if new in ids}, default: default}
    page = st.navigation({section: [_page(p, default) for p in shown if p.section == section]
                          + [_retired(old, BY_ID[new]) for old, new in leaving.items() if BY_ID[new].section == section]
                          for section in SECTIONS if any(p.section == section for p in shown)}, position="top")
    if page.url_path in leaving:  # the page it names, with the link's parameters (a retired page's parts opened)
        _open_parts(page.url_path)
        st.switch_page(_page(BY_ID[leaving[page.url_path]], default),
                       query_params={k: v for k, v in st.query_params.to_dict().items() if not k.startswith("embed")})
    return page


# the box a retired page's parts moved into (`boxes.lazy_box`: its key, what it was last), opened when an old link
# or a lesson step names the page
RETIRED_BOX = {"whole_text": (keys.LINKS_OPEN, keys.LINKS_WAS_OPEN)}


def _open_parts(old: str) -> None:
    for key in RETIRED_BOX.get(old, ()):
        session.put(key, True)


def _retired(old: str, spec: PageSpec):
    """A hidden page at `old` (a retired page's path, or the default page's id), which `navigation` leaves for
    `spec`'s at once."""
    return st.Page(spec.view, title=spec.title, icon=spec.icon, url_path=old, visibility="hidden")


def page_id(page) -> str:
    """The id of the page `navigation()` returned (the default page's url_path is empty)."""
    return page.url_path or _default(offered())


def follow_goto() -> None:
    """Switch to the page a view asked for (`keys.GOTO`), if the server offers it."""
    target = session.pop(keys.GOTO, None)
    if target in RETIRED:
        _open_parts(target)
    target = RETIRED.get(target, target)
    shown = offered()
    if target in {p.id for p in shown}:
        st.switch_page(_page(BY_ID[target], _default(shown)))
