"""The session keys of the page *Head view* alone: the widgets and results no other page reads. The keys
the shell and several pages share are `mha_viz.ui.kit.keys`; the page's controls, which links and lesson steps
carry, live with its feature (`mha_viz/features/head_view/controls.py`) and are named here too."""

from __future__ import annotations

from mha_viz.features.head_view import controls as _head_view

HEAD_WINDOW = _head_view.HEAD_WINDOW
LINKS_SKIP_FIRST = _head_view.LINKS_SKIP_FIRST
LINKS_STRIP = _head_view.LINKS_STRIP
SUBSET_KEYS = _head_view.SUBSET_KEYS
SUBSET_KEY_LIST = _head_view.SUBSET_KEY_LIST
SUBSET_PICK = _head_view.SUBSET_PICK
SUBSET_QUERIES = _head_view.SUBSET_QUERIES
SUBSET_QUERY_LIST = _head_view.SUBSET_QUERY_LIST
STRONGEST_OPEN = "strongest_open"  # its strongest-key table
STRONGEST_WAS_OPEN = "_strongest_open"
WHY_OPEN = "why_open"  # its *Why here?* section on a long run (a forward pass a head picked: built while open)
WHY_WAS_OPEN = "_why_open"
DETAIL_RUN = "_detail_run"  # the run the detail level was chosen for
DETAIL_FORCED = "_detail_forced"  # True when the app, not the user, chose the block view
SUBSET_RUN = "_subset_run"  # the run the ranges were chosen for
LINKS_STRIP_CHART = "links_strip_chart"
LINKS_QUERY_DEFAULT = "_links_query_default"  # the query the section last chose (one that keeps keys)
LINKS_DISTANCES = "links_distances"
LINKS_ROW_CHART = "links_row_chart"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): positions and ranges of the run on
# screen, clamped to each new run and meant to start afresh with it
NOT_KEPT = frozenset({HEAD_WINDOW, SUBSET_QUERIES, SUBSET_KEYS, SUBSET_QUERY_LIST, SUBSET_KEY_LIST})
