"""The Head view's *Links* section, for a dense run and a long run alike: the shared head's kept keys over the
whole text (`views.head_links`: a long run's from its scan, a dense run's by the same rule), drawn as the token
strip, one query's kept keys, the heaviest links and how far they reach; and that query's exact row over every
key at a level of detail (`whole_row`: more keys than bars, each bar the heaviest of its keys, and the row's
heaviest keys listed exactly). The query opens on one that keeps keys (`mha_viz.scan.opening`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.features.head_view import links_figures as link_figures
from mha_viz.scan import opening
from mha_viz.scan.row_detail import BARS, row_detail, top_keys
from mha_viz.text.wording import plural
from mha_viz.ui.kit import boxes, charts, keys, resources, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button
from mha_viz.views import head_links

TOP_KEYS = 10  # the heaviest keys of a row listed exactly


@st.cache_resource(show_spinner=False, max_entries=32)
def _links(key, layer: int, head: int, _run) -> head_links.HeadLinks:
    """The head's links of the run `key` names, made once per server (a dense run's read every row)."""
    return head_links.links(_run, layer, head)


def _query_for(links: head_links.HeadLinks) -> None:
    """The section's query: while nobody has picked one (it is still the one this section chose), the last
    query that keeps keys (`opening.opening_query`), so the table never opens empty; a query picked by the
    user, a link or a lesson stays (within the text)."""
    now, chosen = session.get(head_view_keys.LINKS_QUERY), session.get(head_view_keys.LINKS_QUERY_DEFAULT)
    if now is None or now == chosen or not 0 <= int(now) < links.n:
        query = opening.opening_query(links, links.layer, links.head)
        session.settle(head_view_keys.LINKS_QUERY, query)
        session.put(head_view_keys.LINKS_QUERY_DEFAULT, query)


def links_section(cur, layer: int, head: int) -> None:
    """The section, in an expander under the head's heatmap: computed, drawn and sent only while open."""
    run = cur.run
    box = boxes.lazy_box(st, "Links over the whole text: each query's heaviest keys, how far they reach",
                         keys.LINKS_OPEN, keys.LINKS_WAS_OPEN)
    if not box.open:
        return
    with box:
        links = _links(cur.key, layer, head, run)
        st.caption(f"Each query's {links.top_k} heaviest keys of weight ≥ {links.min_weight:g}"
                   + (" (what the analysis kept of this long text)." if not run.is_dense else ".")
                   + " Hover a bar of the strip for every kept key of its query.")
        # kept from a longer text: the strip's last page at most
        session.settle(head_view_keys.LINKS_STRIP, min(int(session.get(head_view_keys.LINKS_STRIP, 0)),
                                                       max(0, links.n - link_figures.STRIP)))
        _query_for(links)
        start = st.number_input("Token strip from query", 0, links.n - 1, step=link_figures.STRIP,
                                key=head_view_keys.LINKS_STRIP, persist_state=keys.KEEP,
                                help=f"The strip shows {link_figures.STRIP} queries at a time.")
        charts.show(link_figures.token_strip(links, layer, head, int(start)), key=head_view_keys.LINKS_STRIP_CHART,
                    name="token-strip")
        left, right = st.columns(2)
        query = int(left.number_input("Query", 0, links.n - 1, key=head_view_keys.LINKS_QUERY, persist_state=keys.KEEP,
                                      help="Any query of the text: its kept keys, heaviest first."))
        notebook_button.record(links_start=int(start), links_query=query)
        kept = link_figures.query_links(links, layer, head, query)
        elsewhere = max(0.0, float(links.rest[query]))  # (a rounding's −0.000 is 0)
        left.markdown(f"Query {query} “{plain(links.tokens[query])}” keeps {plural(len(kept), 'key')}; "
                      f"{elsewhere:.3f} of its attention is elsewhere.")
        if len(kept):
            left.dataframe(kept, hide_index=True)
        else:  # a user's pick: the section opens on a query that keeps keys
            left.caption(f"No key of this query reaches {links.min_weight:g}: its attention is spread thin. Its "
                         "exact row over every key is below.")
        skip = right.toggle("Leave out links to the first token", key=head_view_keys.LINKS_SKIP_FIRST,
                            persist_state=keys.KEEP, help="Many heads park attention on the first token (a sink).")
        right.markdown("**The heaviest links of the whole text**")
        right.dataframe(link_figures.heaviest_links(links, layer, head, skip_first=skip), hide_index=True)
        charts.show(link_figures.distance_histogram(links, layer, head), key=head_view_keys.LINKS_DISTANCES,
                    name="distances")
        whole_row(run, links, query)


def whole_row(run, links: head_links.HeadLinks, query: int) -> None:
    """Query `query`'s exact row over every key (or the keys the slider keeps), a bar per run of keys."""
    layer, head = links.layer, links.head
    st.markdown(f"**Exact row: query {query} over all {run.n} keys**"
                + ("" if run.is_dense else ", recomputed from what the analysis kept"))
    last = run.n - 1
    shown = session.get(head_view_keys.LINKS_ROW_KEYS)
    if not (isinstance(shown, (tuple, list)) and len(shown) == 2 and 0 <= shown[0] < shown[1] <= last):
        session.settle(head_view_keys.LINKS_ROW_KEYS, (0, last))  # the whole row; a longer text's range is reset
    if last < 1:
        return
    first, final = st.slider("Keys shown (zoom in for every key)", 0, last, key=head_view_keys.LINKS_ROW_KEYS,
                             persist_state=keys.KEEP,
                             help=f"At most {BARS} bars: where more keys are shown, each bar stands for a run of "
                                  "neighbouring keys and shows the heaviest of them.")
    rows, error = resources.attempt(lambda: run.rows(layer, head, query, query + 1), what="Recomputing the row",
                                    out_of_memory="Recomputing this row needs more memory than is free.")
    if error:
        st.error(plain(error), icon=":material/warning:")
        return
    weights = rows[0]
    notebook_button.record(links_keys=[int(first), int(final)])
    detail = row_detail(weights, int(first), int(final) + 1)
    charts.show(link_figures.row_figure(run, layer, head, query, detail), key=head_view_keys.LINKS_ROW_CHART,
                name="exact-row")
    kept = links.weights[query].sum()
    st.caption(f"The whole row sums to {float(weights.sum(dtype=np.float64)):.6f} over its {run.n} keys; the keys "
               f"shown hold {float(detail.mass.sum()):.6f}"
               + (f", in {len(detail.mass)} bars of up to {detail.keys_per_bar} keys" if detail.keys_per_bar > 1
                  else ", each key its own bar")
               + f". The links above are its heaviest keys of weight ≥ {links.min_weight:g} ({float(kept):.3f} of "
               "the row).")
    order, top = top_keys(weights, TOP_KEYS)
    st.markdown(f"**The row's {len(order)} heaviest keys, exactly**")
    st.dataframe(pd.DataFrame({"key": order, "token": [run.tokens[int(k)] for k in order], "weight": top,
                               "distance": query - order}), hide_index=True)
