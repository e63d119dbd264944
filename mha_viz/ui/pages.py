"""The app's pages, registered once: id, title, icon, section and the view that draws it.

`navigation()` turns the registry into `st.navigation`'s sections; a view asks for another page
with `keys.GOTO` (e.g. `views.open_head`), and `follow_goto()` switches at the start of the
next run, so views never need to know where a page lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import streamlit as st

from mha_viz.ui import (
    ablation_views, compare_views, corpus_views, examples_views, focus_views, generate_views, keys, line_views, metric_views, prediction_views, qk_views, session, teach_views, views,
)


@dataclass(frozen=True)
class PageSpec:
    id: str  # also the page's URL path
    title: str
    icon: str
    section: str
    view: Callable[[], None]  # its controls keep their values across visits (persist_state=state.KEEP)


SECTIONS = ("Look", "Measure", "Teach & test", "About")
PAGES = (
    PageSpec("model_view", "Model view", ":material/grid_view:", "Look", views.model_view),
    PageSpec("head_view", "Head view", ":material/zoom_in:", "Look", views.head_view),
    PageSpec("focus", "Token focus", ":material/center_focus_strong:", "Look", focus_views.focus_view),
    PageSpec("lines", "Line view", ":material/share:", "Look", line_views.line_view),
    PageSpec("compare_heads", "Compare heads", ":material/compare:", "Look", metric_views.compare_view),
    PageSpec("across_layers", "Across layers", ":material/stacked_line_chart:", "Look", metric_views.layers_view),
    PageSpec("generate", "Generate", ":material/edit_note:", "Look", generate_views.generate_view),
    PageSpec("head_metrics", "Head metrics", ":material/leaderboard:", "Measure", metric_views.metrics_view),
    PageSpec("similarity", "Head similarity", ":material/hub:", "Measure", metric_views.similarity_view),
    PageSpec("corpus", "Corpus", ":material/library_books:", "Measure", corpus_views.corpus_view),
    PageSpec("examples", "Head examples", ":material/format_quote:", "Measure", examples_views.examples_view),
    PageSpec("compare", "Compare texts or models", ":material/difference:", "Measure", compare_views.compare_view),
    PageSpec("prediction", "Heads behind a prediction", ":material/target:", "Measure",
             prediction_views.prediction_view),
    PageSpec("teaching", "Teaching: step by step", ":material/school:", "Teach & test", teach_views.teaching_view),
    PageSpec("ablation", "Switch heads off", ":material/toggle_off:", "Teach & test", ablation_views.ablation_view),
    PageSpec("qk", "Queries and keys", ":material/scatter_plot:", "Teach & test", qk_views.qk_view),
    PageSpec("model_facts", "Model facts", ":material/info:", "About", views.facts_view),
)
BY_ID = {p.id: p for p in PAGES}
DEFAULT = "model_view"


def _page(spec: PageSpec):
    return st.Page(spec.view, title=spec.title, icon=spec.icon, url_path=spec.id, default=spec.id == DEFAULT)


def navigation():
    """`st.navigation` over every page, grouped by section (st.Page needs a running script, so
    the page objects are made on each run from the one registry)."""
    return st.navigation({section: [_page(p) for p in PAGES if p.section == section] for section in SECTIONS},
                         expanded=True)


def follow_goto() -> None:
    """Switch to the page a view asked for (`keys.GOTO`), if any."""
    target = session.pop(keys.GOTO, None)
    if target in BY_ID:
        st.switch_page(_page(BY_ID[target]))
