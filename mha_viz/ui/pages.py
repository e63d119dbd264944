"""The app's pages, registered once: id, title, icon, section and the view that draws it.

`navigation()` turns the registry into `st.navigation`'s sections; a view asks for another page
with `keys.GOTO` (e.g. `shared_head.open_head`), and `follow_goto()` switches at the start of the
next run, so views never need to know where a page lives. A retired page's id (`page_ids.RETIRED`: an
old link's path, a lesson's step) opens the page its parts moved to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import streamlit as st

from mha_viz.ui import (
    ablation_page,
    across_layers_page,
    compare_heads_page,
    compare_page,
    composition_page,
    corpus_page,
    examples_page,
    focus_page,
    generate_page,
    head_metrics_page,
    head_view_page,
    keys,
    lines_page,
    model_facts_page,
    model_view_page,
    prediction_page,
    qk_page,
    resources,
    session,
    similarity_page,
    teaching_page,
)
from mha_viz.ui.page_ids import RETIRED, with_retired


@dataclass(frozen=True)
class PageSpec:
    id: str  # also the page's URL path
    title: str
    icon: str
    section: str
    view: Callable[[], None]  # its controls keep their values across visits (persist_state=keys.KEEP)


SECTIONS = ("Look", "Measure", "Teach & test", "About")
PAGES = (
    PageSpec("model_view", "Model view", ":material/grid_view:", "Look", model_view_page.model_view_page),
    PageSpec("head_view", "Head view", ":material/zoom_in:", "Look", head_view_page.head_view_page),
    PageSpec("focus", "Token focus", ":material/center_focus_strong:", "Look", focus_page.focus_page),
    PageSpec("lines", "Line view", ":material/share:", "Look", lines_page.lines_page),
    PageSpec("compare_heads", "Compare heads", ":material/compare:", "Look", compare_heads_page.compare_heads_page),
    PageSpec("across_layers", "Across layers", ":material/stacked_line_chart:", "Look",
             across_layers_page.across_layers_page),
    PageSpec("generate", "Generate", ":material/edit_note:", "Look", generate_page.generate_page),
    PageSpec("head_metrics", "Head metrics", ":material/leaderboard:", "Measure", head_metrics_page.head_metrics_page),
    PageSpec("similarity", "Head similarity", ":material/hub:", "Measure", similarity_page.similarity_page),
    PageSpec("composition", "Head composition", ":material/account_tree:", "Measure",
             composition_page.composition_page),
    PageSpec("corpus", "Corpus", ":material/library_books:", "Measure", corpus_page.corpus_page),
    PageSpec("examples", "Head examples", ":material/format_quote:", "Measure", examples_page.examples_page),
    PageSpec("compare", "Compare texts or models", ":material/difference:", "Measure", compare_page.compare_page),
    PageSpec("prediction", "Heads behind a prediction", ":material/target:", "Measure",
             prediction_page.prediction_page),
    PageSpec("teaching", "Teaching: step by step", ":material/school:", "Teach & test", teaching_page.teaching_page),
    PageSpec("ablation", "Switch heads off", ":material/toggle_off:", "Teach & test", ablation_page.ablation_page),
    PageSpec("qk", "Queries and keys", ":material/scatter_plot:", "Teach & test", qk_page.qk_page),
    PageSpec("model_facts", "Model facts", ":material/info:", "About", model_facts_page.model_facts_page),
)
BY_ID = {p.id: p for p in PAGES}
DEFAULT = "model_view"


def offered() -> tuple[PageSpec, ...]:
    """The pages this server offers: every page, or in a workshop (`resources.workshop`) the lesson's."""
    lesson = resources.workshop()
    return PAGES if lesson is None else tuple(p for p in PAGES if p.id in lesson.pages)


def lesson_ids() -> list[str]:
    """What a lesson's steps may name here: the pages offered, and the retired ones that open on one of them."""
    return with_retired(p.id for p in offered())


def _default(shown: tuple[PageSpec, ...]) -> str:
    """The default page's id: DEFAULT, or the first page offered without it (a workshop)."""
    return DEFAULT if any(p.id == DEFAULT for p in shown) else shown[0].id


def _page(spec: PageSpec, default: str):
    return st.Page(spec.view, title=spec.title, icon=spec.icon, url_path=spec.id, default=spec.id == default)


def navigation():
    """`st.navigation` over the pages offered, grouped by section, at the top of the page: the
    sidebar starts with the model and the sentence box, where a person starts (st.Page needs a
    running script, so the page objects are made on each run from the one registry)."""
    shown = offered()
    default = _default(shown)
    ids = {p.id for p in shown}
    moved = [(old, BY_ID[new]) for old, new in RETIRED.items() if new in ids]
    page = st.navigation({section: [_page(p, default) for p in shown if p.section == section]
                          + [_retired(old, spec) for old, spec in moved if spec.section == section]
                          for section in SECTIONS if any(p.section == section for p in shown)}, position="top")
    if page.url_path in RETIRED:  # an old link: the page its parts moved to, with the link's parameters
        _open_parts(page.url_path)
        st.switch_page(_page(BY_ID[RETIRED[page.url_path]], default),
                       query_params={k: v for k, v in st.query_params.to_dict().items() if not k.startswith("embed")})
    return page


# the box a retired page's parts moved into (`boxes.lazy_box`: its key, what it was last), opened when an old link
# or a lesson step names the page
RETIRED_BOX = {"whole_text": (keys.LINKS_OPEN, keys.LINKS_WAS_OPEN)}


def _open_parts(old: str) -> None:
    for key in RETIRED_BOX.get(old, ()):
        session.put(key, True)


def _retired(old: str, spec: PageSpec):
    """A hidden page at a retired page's path (an old link), which `navigation` leaves for `spec`'s at once."""
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
