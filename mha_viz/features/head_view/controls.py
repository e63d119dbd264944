"""The page *Head view*'s own controls: the inputs that shape its view, each under its session key, which
links and lesson steps carry (its record's `controls`; `ui/kit/page_controls` reads and restores them)."""

from __future__ import annotations

from mha_viz.export import shared_controls
from mha_viz.export import view_params as vp

HEAD_RESCALE = "head_rescale"
HEAD_WINDOW = "head_window"
LINKS_SKIP_FIRST = "links_skip_first"  # leave out links to the first token
LINKS_STRIP = "links_strip"  # the token strip's first query
SUBSET_KEYS = "subset_keys"  # (start, stop) of the keys shown
SUBSET_KEY_LIST = "subset_key_list"  # the picked key positions
SUBSET_PICK = "subset_pick"  # pick-lists instead of ranges
SUBSET_QUERIES = "subset_queries"  # (start, stop) of the queries shown in the "queries × keys" detail
SUBSET_QUERY_LIST = "subset_query_list"  # the picked query positions

# the page's inputs that no link or lesson step carries (`vp.local` controls of CONTROLS, with why),
# and its other keys that the kit's keys held
SUBSET_PRESET = "subset_preset"  # a sentence preset that sets both ranges
LINKS_QUERY = "links_query"  # the query whose kept keys and exact row are shown
LINKS_ROW_KEYS = "links_row_keys"  # the keys the exact row shows (a range; the whole row by default)

CONTROLS = (
    vp.flag(HEAD_RESCALE),
    vp.span(HEAD_WINDOW, default=lambda cur: (0, min(cur.run.n, 96))),
    vp.flag(SUBSET_PICK),
    vp.span(SUBSET_QUERIES, default=lambda cur: (0, min(cur.run.n, 96))),
    vp.span(SUBSET_KEYS, default=lambda cur: (0, min(cur.run.n, 96))),
    vp.picks(SUBSET_QUERY_LIST, upto=vp.TOKENS),
    vp.picks(SUBSET_KEY_LIST, upto=vp.TOKENS),
    vp.flag(shared_controls.WHY_PATTERN),
    vp.number(shared_controls.WHY_QUERY, 0, upto=vp.TOKENS, default=vp.last_shown),
    vp.number(shared_controls.WHY_KEY, 0, upto=vp.TOKENS, default=vp.first_shown),
    vp.number(shared_controls.WHY_SECOND, -1, upto=vp.TOKENS, default=-1),
    # the Links section (head_links_view): positions of the run on screen, clamped by the section
    vp.number(LINKS_STRIP, 0, default=0),
    vp.flag(LINKS_SKIP_FIRST),
    *vp.local("a preset acts once: it sets both ranges", SUBSET_PRESET),
    *vp.local("the Links section opens on a query of this head that keeps keys, its row's keys follow the query",
              LINKS_QUERY, LINKS_ROW_KEYS),
)

# the page's own session keys besides its controls: its results, tables, buttons and open sections, which no
# link or lesson carries
STRONGEST_OPEN = "strongest_open"  # its strongest-key table
STRONGEST_WAS_OPEN = "_strongest_open"
WHY_OPEN = "why_open"  # its *Why here?* box (a forward pass a cell picked: built only while open)
WHY_WAS_OPEN = "_why_open"
DETAIL_RUN = "_detail_run"  # the run the detail level was chosen for
DETAIL_FORCED = "_detail_forced"  # True when the app, not the user, chose the block view
SUBSET_RUN = "_subset_run"  # the run the ranges were chosen for
LINKS_STRIP_CHART = "links_strip_chart"
LINKS_QUERY_DEFAULT = "_links_query_default"  # the query the section last chose (one that keeps keys)
LINKS_DISTANCES = "links_distances"
LINKS_ROW_CHART = "links_row_chart"

# its inputs drawn without persist_state=KEEP (tests/unit/test_ui_house.py): positions and ranges of the run on
# screen, clamped to each new run and meant to start afresh with it; a preset that acts once (it sets both ranges)
NOT_KEPT = frozenset({SUBSET_PRESET, HEAD_WINDOW, SUBSET_QUERIES, SUBSET_KEYS, SUBSET_QUERY_LIST, SUBSET_KEY_LIST,
                      shared_controls.WHY_QUERY, shared_controls.WHY_KEY, shared_controls.WHY_SECOND})
