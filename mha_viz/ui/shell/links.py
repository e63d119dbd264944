"""Share a view by link: a URL's query parameters open the app on that model, text and head, the
URL follows the view after every run, and the sidebar's *Share* box shows the link to copy.

The parameters and their checks are `mha_viz.export.link_params`'; this module reads them once per session
(`read`, before the sidebar draws its inputs), applies the layer, head, detail and the page's own
controls (`page_controls`) once the model is loaded (`apply_pending`), and writes the view back
(`share`, after the page has drawn).
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from mha_viz import catalogue
from mha_viz.export import link_params as links
from mha_viz.ui.kit import (
    boxes,
    head_detail,
    keys,
    page_controls,
    resources,
    seq2seq_views,
    session,
    shared_head,
)
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import navigation as pages
from mha_viz.ui.shell import sidebar, state
from mha_viz.views import detail

# the head view's detail levels by their slug in a link (links.DETAILS), and back
DETAIL_OPTIONS = {"tokens": head_detail.FULL, "window": head_detail.WINDOW, "blocks": head_detail.BLOCKS,
                  "words": head_detail.WORDS, "subset": head_detail.SUBSET}
DETAIL_SLUGS = {option: slug for slug, option in DETAIL_OPTIONS.items()}
HEAD_VIEW = "head_view"  # the page whose detail level a link carries


def read(page_id: str) -> None:
    """On the session's first run, the URL's link (opened on page `page_id`): its model, text and options go into the
    sidebar's inputs (`sidebar.choose`; call it before the sidebar draws them), its layer, head and
    detail wait for the model (`apply_pending`), and what was ignored waits to be shown. A link carrying controls
    of one other page and not of its own opens that page (`owner_elsewhere`)."""
    if session.get(keys.LINK_READ):
        return
    session.put(keys.LINK_READ, True)
    if not has_view():  # a lesson's step (`lesson_flow`), or the defaults
        return
    conf = resources.settings()
    link, notices = links.parse(st.query_params.to_dict(), allowed_models=conf.models, public=conf.public,
                                controls=page_controls.CONTROLS)
    open_view(link, notices)
    if (owner := owner_elsewhere(page_id, link)) is not None:
        session.put(keys.GOTO, owner)


def owner_elsewhere(page_id: str, link: links.Link) -> str | None:
    """The one page that owns every page control `link` carries that page `page_id` does not, or None (none such,
    or several pages could own them): an old link to *Heads behind a prediction* naming its circuit (``circuit``,
    now *Circuit behind a prediction*'s) opens the circuit's page."""
    own = {c.link_name for c in page_controls.BY_PAGE.get(page_id, ())}
    foreign = {name for name, _ in link.page} - own
    if not foreign:
        return None
    owners = [p for p, controls in page_controls.BY_PAGE.items() if foreign <= {c.link_name for c in controls}]
    return owners[0] if len(owners) == 1 else None


def has_view() -> bool:
    """Whether the URL carries a view of its own (more than a lesson and its step)."""
    return bool(set(st.query_params.to_dict()) - set(links.LESSON) - set(links.EMBED))


def open_view(link: links.Link, notices: list[str] | None = None, *, exact: bool = False) -> None:
    """Put `link`'s view in the inputs (before the sidebar draws them) and its layer, head, detail and
    page controls in wait for the model; `notices` (what a link ignored) wait to be shown with what
    this adds. `exact` (a lesson's step): what the link leaves out goes back to the app's default,
    the pages' own controls included, so the view opens the same whatever the session had chosen."""
    notices = list(notices or [])
    if exact:
        page_controls.reset()
        offered = sidebar.choose(model=link.model, text=link.text or sidebar.DEFAULT_TEXT, hide=link.hide,
                                 ours=link.ours, contributions=link.contributions,
                                 dtype=link.dtype or sidebar.default_precision(), chat=link.chat)
    else:
        offered = sidebar.choose(model=link.model, text=link.text, hide=link.hide or None, ours=link.ours or None,
                                 contributions=link.contributions or None, dtype=link.dtype,
                                 chat=link.chat or False)
    if not offered:
        notices.append(f"This server does not offer the link's model “{link.model}”: "
                       "the default model is shown.")
    if exact or (link.layer, link.head, link.detail) != (None, None, None) or link.page:
        session.put(keys.LINK_PENDING, link)
    if notices:
        session.put(keys.LINK_NOTICES, notices)


def apply_pending(cur: state.Current) -> None:
    """The link's layer (a model layer number, made a row of the run), head and detail, checked
    against the run the sidebar just computed; then every notice about the link, once, above the
    page (escaped: they quote the link)."""
    link = session.pop(keys.LINK_PENDING, None)
    notices = list(session.pop(keys.LINK_NOTICES, []))
    if link is not None:
        if (link.layer, link.head, link.detail) != (None, None, None) or not link.page:
            notices += _apply_head(link, cur)
        notices += page_controls.restore(link, cur)
    if notices:
        st.warning("\n\n".join(plain(n) for n in notices), icon=":material/link:")


def _apply_head(link: links.Link, cur: state.Current) -> list[str]:
    run = cur.run
    if run is None or cur.stale:
        return ["The link's layer, head and detail were not applied: its text could not be analysed."]
    if seq2seq_views.is_cross(run):
        return ["The link's layer, head and detail apply to self-attention: pick Encoder or Decoder."]
    row, head, notices = links.resolve_head(link, run.layer_ids, run.num_heads)
    shared_head.choose_head(row, head)
    if link.detail is not None:
        option = DETAIL_OPTIONS[link.detail]
        if option not in head_detail.detail_options(run.n):
            notices.append(f"The link's detail “{link.detail}” is not offered for {run.n} tokens "
                           f"(at most {detail.MAX_FULL_TOKENS}): the head view opens on its default.")
        else:
            head_detail.choose_detail(option)
    return notices


def view_link(page_id: str, cur: state.Current) -> tuple[links.Link, links.Link]:
    """(the view as a link, what opening the app with no parameters would give): from the
    sidebar's inputs, the chosen head of the current run, on the head view its detail, and the
    page's own controls (`page_controls`)."""
    chosen = sidebar.choices()
    page, default_page = page_controls.written(page_id, cur)  # what the page's own inputs hold, whatever the run
    user, system, reply = chosen.chat or (None, None, None)
    link = links.Link(model=chosen.model, text=chosen.text, hide=chosen.hide, ours=chosen.ours,
                      contributions=chosen.contributions, dtype=chosen.dtype, page=page, user=user,
                      system=system or None, reply=reply or None)
    default = links.Link(text=sidebar.DEFAULT_TEXT, dtype="auto",  # a link states any other precision: servers differ
                         page=default_page)
    run = cur.run
    if run is None or cur.stale or seq2seq_views.is_cross(run):  # another input's run, or no token axis of its own
        return link, default
    row, head = shared_head.chosen_head()
    default = links.Link(text=sidebar.DEFAULT_TEXT, layer=run.layer_ids[0], head=0,
                         detail=DETAIL_SLUGS[head_detail.default_detail(run.n)], dtype="auto", page=default_page)
    fields = {}
    if 0 <= row < run.num_layers:
        fields["layer"] = run.layer_ids[row]
    if 0 <= head < run.num_heads:
        fields["head"] = head
    if page_id == HEAD_VIEW:
        fields["detail"] = DETAIL_SLUGS.get(head_detail.detail_choice())
    if page_id in catalogue.ids() and catalogue.feature(page_id).picks_head and shared_head.head_chosen():
        default = replace(default, layer=None, head=None)  # the page would open on a head of its own choosing
    return replace(link, **fields), default


def base_url(url_path: str) -> str:
    """The app's address without the page (st.context.url holds the current page's path), or ""
    when the browser did not say (the link is then relative to the server)."""
    here = (st.context.url or "").rstrip("/")
    suffix = f"/{url_path}" if url_path else ""
    return here[: -len(suffix)] if suffix and here.endswith(suffix) else here


def share(page, cur: state.Current, lesson: dict[str, str] | None = None) -> None:
    """After the page has drawn: the URL's query parameters follow the view (defaults left out)
    and `lesson`'s (the lesson followed and its step), and the sidebar's *Share* box shows the link
    with a *Copy link* button."""
    page_id = pages.page_id(page)
    link, default = view_link(page_id, cur)
    params = links.encode(link, default=default) | (lesson or {})
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
    box = boxes.lazy_box(st.sidebar, "Share", keys.SHARE_OPEN, keys.SHARE_WAS_OPEN, icon=":material/share:")
    if not box.open:  # the link (with the whole text in it) is built and sent only while the box is open
        return
    with box:
        st.caption("**Copy link**: the button at the right of the box copies the link to this view "
                   "(page, model, text, head, options and this page's own choices; on Compare, also run B). "
                   "The address bar holds the same link.")
        st.code(links.url(base_url(page.url_path), page.url_path, params), language=None, wrap_lines=True)
        if link.user and not links.chat_fits(link):
            st.caption(f"A message of the chat is too long to share by link (at most {links.MAX_TEXT_CHARS:,} "
                       "characters each): the link opens on the default text.")
        elif link.text and not link.user and not links.text_fits(link.text):
            st.caption(f"The text is too long to share by link ({len(link.text):,} characters, at most "
                       f"{links.MAX_TEXT_CHARS:,}): the link opens on the default text.")
