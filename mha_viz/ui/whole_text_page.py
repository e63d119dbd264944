"""The *Whole text* page: every head over the sidebar's whole text, up to the model's context, from one
scan (`mha_viz.scan`): the statistics of every head (the table, the head map by any measure, the ten
highest), the thumbnails, and one head's links over the whole text (a token strip with each query's
kept keys, the heaviest links, how far they reach, one query's exact row over every key and exact rows for any
window of queries: `scan_rows`). The Model view's button opens it with the scan started (`keys.SCAN_START`); the
progress says the time left; the pane opens on a head and query that keep keys (`mha_viz.scan.opening`)."""

from __future__ import annotations

import io

import streamlit as st

import mha_viz
from mha_viz import needs
from mha_viz.figures import heads as head_figures
from mha_viz.figures import metrics as metric_figures
from mha_viz.figures import scan as scan_figures
from mha_viz.metrics import METRICS
from mha_viz.scan import opening
from mha_viz.text.tokenize import count_text
from mha_viz.text.wording import plural
from mha_viz.ui import charts, jobs, keys, resources, scan_rows, session, shared_head, state
from mha_viz.ui.text import plain

CANCEL_HELP = "Stop the scan; the text, the model and this page's choices stay."


def whole_text_page() -> None:
    st.title("Whole text")
    asked = bool(session.pop(keys.SCAN_START, False))  # the Model view's button: open this page and scan (once)
    cur = state.current()
    model, text = cur.text_model, cur.text
    if model is None:  # no text yet, or the model did not load: the sidebar's own message
        if cur.notice or cur.error:
            (st.info if cur.notice else st.error)(plain(cur.notice or cur.error), icon=":material/info:")
        else:
            st.info("Load a model in the sidebar: this page scans its whole text with it.", icon=":material/info:")
        return
    try:  # reads only the part of a long text that the limit needs
        toks = mha_viz.tokenize(model, text, whole_text=True)
    except mha_viz.InputError as exc:
        st.info(plain(str(exc)), icon=":material/edit:")
        return
    if model.is_encoder_decoder:
        st.info("This model is an encoder–decoder: the scan reads its encoder's self-attention over the sidebar's "
                "text (the source).", icon=":material/alt_route:")
    total = count_text(toks.total, toks.total_is_estimate)
    st.caption(f"Every head of {plain(model.name)} over the sidebar's whole text: {toks.n} tokens"
               + (f" of {total} (the model reads {model.max_positions}"
                  + (", this server's limit is lower" if toks.n < min(toks.total, model.max_positions) else "")
                  + ")" if toks.truncated else "")
               + f". One pass: the model runs once, and each layer's attention is reduced a block of queries at a "
               f"time to each head's statistics, each query's heaviest keys and a thumbnail; holding every "
               f"head's attention would take {resources.size_text(model.attention_bytes(toks.n))}. On a CPU a long "
               "text takes minutes.")
    key = (cur.model_key, text, toks.n)
    store = session.setdefault(keys.SCANS, {})
    if jobs.cancelled(keys.SCAN_RUNNING) is not None:
        st.info("The scan was cancelled; press the button to start it again.", icon=":material/stop_circle:")
    if key not in store and (summary := _sidebars_scan(cur.full_run, toks)) is not None:
        store.clear()
        store[key] = summary  # the sidebar's run is long over these very tokens: its scan, no second pass
    if key not in store:
        buttons = jobs.buttons(f"Scan all {plural(toks.n, 'token')}", keys.SCAN_GO, cancel_key=keys.SCAN_CANCEL,
                               cancel_help=CANCEL_HELP, widths=(1, 1, 4))
        if not (buttons.pressed or asked):
            return
        if not buttons.pressed:
            buttons.live()  # started by the Model view's button: Cancel works all the same
        store.clear()  # one at a time: the last scan (its kept keys, its spilled inputs) goes first
        scan, error = jobs.run(keys.SCAN_RUNNING, key, lambda progress: _scan(model, text, progress),
                               first=f"Running {model.name}…", what="The scan",
                               out_of_memory="This scan needs more memory than this machine has free: shorten the "
                                             "text or pick a smaller model.")
        if error:
            buttons.idle()
            st.error(plain(error), icon=":material/warning:")
            return
        buttons.done()
        store[key] = scan
    scan = store[key]
    _statistics(scan, key)
    _thumbnails(scan, key)
    _one_head(scan)
    _download(scan)


def _sidebars_scan(run, toks):
    """The scan of the sidebar's run when it is a long run (`AttentionRun.summary`) of these very tokens."""
    summary = getattr(run, "summary", None)
    return summary if summary is not None and list(summary.token_ids) == list(toks.ids) else None


def _scan(model, text: str, progress):
    with resources.slots().hold(need=needs.scan(model, needs.tokens(model, text, whole_text=True))):
        return mha_viz.scan(model, text, progress=progress)


def _pick(widget_key: str, scan) -> None:
    """A click on a layers × heads chart of the scan makes that head the shared one."""
    picked = charts.clicked(widget_key, lambda points: head_figures.grid_pick(points, scan.num_heads))
    if picked is not None and picked[0] < scan.num_layers:
        shared_head.choose_head_in(scan.layer_ids, *picked)


def _measures(scan) -> list[str]:
    return [c for c in scan.table.columns if c in METRICS or c == "distance_norm"]


def _statistics(scan, key) -> None:
    st.subheader("Every head over the whole text")
    names = _measures(scan)
    if session.get(keys.SCAN_METRIC) not in names:
        session.settle(keys.SCAN_METRIC, names[0])
    metric = st.selectbox("Colour the heads by", names, key=keys.SCAN_METRIC, persist_state=keys.KEEP,
                          format_func=lambda c: METRICS[c].label if c in METRICS else "Mean distance / n")
    measure = METRICS[metric] if metric in METRICS else None
    label = measure.label if measure else "Mean distance / n"
    st.caption((f"`{measure.formula}`: high, {measure.high}; low, {measure.low}. " if measure else
                "The mean distance divided by the number of tokens, 0 … 1: how far back a head looks, whatever "
                "the text's length. ") + f"Over every query of the {scan.n} tokens.")
    values = scan.table[metric].to_numpy(float).reshape(scan.num_layers, scan.num_heads)
    patterns = scan.table["pattern"].to_numpy(object).reshape(scan.num_layers, scan.num_heads)
    fig = charts.cached("scan_map", (key, metric), lambda: metric_figures.metric_grid(
        values, title=f"{label}, every head", patterns=patterns,
        layer_ids=scan.layer_ids))
    charts.show(fig, key=keys.SCAN_MAP, on_select=lambda: _pick(keys.SCAN_MAP, scan), selection_mode="points",
                width="content")
    top = scan.table.sort_values(metric, ascending=False, kind="stable").head(10)
    st.markdown("**The 10 heads highest on it.** Click a cell of the map (or a thumbnail) to see that head's links "
                "below.")
    st.dataframe(top[["layer", "head", metric, "pattern"]], hide_index=True, width="content")
    with st.expander("The whole table"):
        st.dataframe(scan.table, hide_index=True)


def _thumbnails(scan, key) -> None:
    st.subheader("Thumbnails")
    rescale = bool(session.get(keys.GRID_RESCALE, True))
    fig = charts.cached("scan_grid", (key, rescale), lambda: head_figures.grid_figure(
        scan.pooled, rescale=rescale, layer_ids=scan.layer_ids))
    charts.show(fig, key=keys.SCAN_GRID, on_select=lambda: _pick(keys.SCAN_GRID, scan), selection_mode="points",
                width="content")
    s = scan.pooled.shape[-1]
    st.caption(f"All {scan.n} tokens, each head max-pooled to {s} × {s} (queries down, keys across). Click one "
               "to see its links below.")


def _query_for(scan, row: int, head: int) -> None:
    """The pane's query: while nobody has picked one (it is still the one this page chose), the last query of
    the head that keeps keys (`scan.opening`), so the pane never opens on an empty table; a query picked by
    the user, a link or a lesson stays (within the text)."""
    now, chosen = session.get(keys.SCAN_QUERY), session.get(keys.SCAN_QUERY_DEFAULT)
    if now is None or now == chosen or not 0 <= int(now) < scan.n:
        query = opening.opening_query(scan, row, head)
        session.settle(keys.SCAN_QUERY, query)
        session.put(keys.SCAN_QUERY_DEFAULT, query)


def _one_head(scan) -> None:
    st.subheader("One head's links over the whole text")
    first = None if shared_head.head_chosen() else opening.opening_head(scan)  # used while no head is chosen
    row, head = shared_head.pick_head(scan.layer_ids, scan.num_heads, keys.SCAN_LAYER, keys.SCAN_HEAD,
                                      opening=first)
    # kept from a longer text: the strip's last page at most
    session.settle(keys.SCAN_STRIP, min(int(session.get(keys.SCAN_STRIP, 0)), max(0, scan.n - scan_figures.STRIP)))
    _query_for(scan, row, head)
    start = st.number_input("Token strip from query", 0, scan.n - 1, step=scan_figures.STRIP, key=keys.SCAN_STRIP,
                            persist_state=keys.KEEP, help="The strip shows 400 queries at a time.")
    charts.show(scan_figures.token_strip(scan, row, head, int(start)), key=keys.SCAN_STRIP_CHART, name="token-strip")
    left, right = st.columns(2)
    query = left.number_input("Query", 0, scan.n - 1, key=keys.SCAN_QUERY, persist_state=keys.KEEP,
                              help="Any query of the text: its kept keys, heaviest first.")
    links = scan_figures.query_links(scan, row, head, int(query))
    elsewhere = max(0.0, float(scan.rest(row, head)[int(query)]))  # (a rounding's −0.000 is 0)
    left.markdown(f"Query {int(query)} “{plain(scan.tokens[int(query)])}” keeps {plural(len(links), 'key')}; "
                  f"{elsewhere:.3f} of its attention is elsewhere.")
    if len(links):
        left.dataframe(links, hide_index=True)
    else:  # a user's pick: the page opens on a query that keeps keys
        left.caption(f"No key of this query reaches {scan.min_weight:g}: its attention is spread thin. Its exact "
                     "row over every key is below.")
    skip = right.toggle("Leave out links to the first token", key=keys.SCAN_SKIP_FIRST, persist_state=keys.KEEP,
                        help="Many heads park attention on the first token (a sink).")
    right.markdown("**The heaviest links of the whole text**")
    right.dataframe(scan_figures.heaviest_links(scan, row, head, skip_first=skip), hide_index=True)
    charts.show(scan_figures.distance_histogram(scan, row, head), key=keys.SCAN_DISTANCES, name="distances")
    scan_rows.whole_row(scan, row, head, int(query))
    scan_rows.window(scan, row, head)


def _npz(scan) -> bytes:
    buffer = io.BytesIO()
    scan.save(buffer)
    return buffer.getvalue()


def _download(scan) -> None:
    # written when pressed (a callable), not on every rerun of the page: 150 MB at SmolLM2's 8,192 tokens
    st.download_button("Download the scan (.npz)", lambda: _npz(scan), file_name="scan.npz", key=keys.SCAN_DOWNLOAD,
                       help="Reopen it in a notebook with mha_viz.Scan.load(path) (no pickle); attach the model "
                            "(scan.attach(model)) for exact rows.")
