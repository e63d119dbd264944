"""Share a view by link: a URL's query parameters open the app on that model, text and head, the
URL follows the view after every run, and the sidebar's *Share* box shows the link to copy.

The parameters and their checks are `mha_viz.links`'; this module reads them once per session
(`read`, before the sidebar draws its inputs), applies the layer, head and detail once the model
is loaded (`apply_pending`), and writes the view back (`share`, after the page has drawn).
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from mha_viz import detail, links
from mha_viz.ui import compare_views, keys, pages, seq2seq_views, session, state, views

# the head view's detail levels by their slug in a link (links.DETAILS), and back
DETAIL_OPTIONS = {"tokens": views.FULL, "window": views.WINDOW, "blocks": views.BLOCKS, "words": views.WORDS,
                  "subset": views.SUBSET}
DETAIL_SLUGS = {option: slug for slug, option in DETAIL_OPTIONS.items()}
HEAD_VIEW = "head_view"  # the page whose detail level a link carries
COMPARE = "compare"  # the page whose run B a link carries


def read() -> None:
    """On the session's first run, the URL's link: its model, text and options go into the
    sidebar's widget keys (call it before the sidebar draws them), its layer, head and detail wait
    for the model (`apply_pending`), and what was ignored waits to be shown."""
    if session.get(keys.LINK_READ):
        return
    session.put(keys.LINK_READ, True)
    conf = state.settings()
    link, notices = links.parse(st.query_params.to_dict(), allowed_models=conf.models, public=conf.public)
    options, _ = state.model_options()
    if not _put_model(link.model, options, keys.MODEL_CHOICE, keys.MODEL_OTHER):
        notices.append(f"This server does not offer the link's model “{link.model}”: "
                       "the default model is shown.")
    if link.text is not None:
        session.put(keys.TEXT, link.text)
    if link.hide:
        session.put_all((keys.HIDE_SPECIAL, keys.HIDE_FIRST), ("special" in link.hide, "first" in link.hide))
    if link.ours:
        session.put(keys.LOCAL_ATTENTION, True)
    if link.contributions:
        session.put(keys.LENS, keys.LENS_CONTRIBUTIONS)
    if link.dtype is not None:
        session.put(keys.PRECISION, link.dtype)
    notices += _read_compare(link, options)
    if (link.layer, link.head, link.detail) != (None, None, None):
        session.put(keys.LINK_PENDING, link)
    if notices:
        session.put(keys.LINK_NOTICES, notices)


def _read_compare(link: links.Link, options: list) -> list[str]:
    """The Compare page's mode and run B into its widget keys; notices for what does not apply."""
    if link.compare is not None:
        session.put(keys.CMP_MODE, compare_views.MODES[link.compare])
    if link.text_b is not None:
        session.put(keys.CMP_TEXT_B, link.text_b)
    if not _put_model(link.model_b, options, keys.CMP_MODEL_B, keys.CMP_OTHER_B):
        return [f"This server does not offer the link's model B “{link.model_b}”: model B is the default."]
    if link.model_b is not None:
        session.put(keys.CMP_LOCAL_B, link.ours_b)
    return []


def _put_model(spec: str | None, options: list, choice_key: str, other_key: str) -> bool:
    """A link's model into a model picker (`choice_key`, and `other_key` for a hub id or folder
    typed in); False when the picker cannot take it (nothing asked: True)."""
    if spec is None:
        return True
    if spec in options:
        session.put(choice_key, spec)
    elif state.OTHER in options:
        session.put_all((choice_key, other_key), (state.OTHER, spec))
    else:
        return False
    return True


def _picked_model(choice_key: str, other_key: str) -> str | None:
    """What a model picker holds: its choice, or the hub id or folder typed under *Other*."""
    choice = session.get(choice_key)
    model = (session.get(other_key) or "") if choice == state.OTHER else (choice or "")
    return model.strip() or None


def apply_pending(cur: state.Current) -> None:
    """The link's layer (a model layer number, made a row of the run), head and detail, checked
    against the run the sidebar just computed; then every notice about the link, once, above the
    page (escaped: they quote the link)."""
    link = session.pop(keys.LINK_PENDING, None)
    notices = list(session.pop(keys.LINK_NOTICES, []))
    if link is not None:
        notices += _apply_head(link, cur)
    if notices:
        st.warning("\n\n".join(state.plain(n) for n in notices), icon=":material/link:")


def _apply_head(link: links.Link, cur: state.Current) -> list[str]:
    run = cur.run
    if run is None or cur.stale:
        return ["The link's layer, head and detail were not applied: its text could not be analysed."]
    if seq2seq_views.is_cross(run):
        return ["The link's layer, head and detail apply to self-attention: pick Encoder or Decoder."]
    row, head, notices = links.resolve_head(link, run.layer_ids, run.num_heads)
    if row is not None:
        session.put(keys.SEL_LAYER, row)
    if head is not None:
        session.put(keys.SEL_HEAD, head)
    if link.detail is not None:
        option = DETAIL_OPTIONS[link.detail]
        if option == views.FULL and run.n > detail.MAX_FULL_TOKENS:
            notices.append(f"The link's detail “{link.detail}” is not offered for {run.n} tokens "
                           f"(at most {detail.MAX_FULL_TOKENS}): the head view opens on its default.")
        else:
            session.put_all((keys.HEAD_DETAIL, keys.DETAIL_LINKED), (option, True))
    return notices


def _default_detail(n: int) -> str:
    """The slug of the detail level the head view opens on for n tokens (views._head_figure)."""
    return DETAIL_SLUGS[views.FULL if n <= detail.FULL_DETAIL_TOKENS else views.BLOCKS]


def current(page_id: str, cur: state.Current) -> tuple[links.Link, links.Link]:
    """(the view as a link, what opening the app with no parameters would give): from the
    sidebar's inputs, the chosen head of the current run, and on the head view its detail."""
    hide = tuple(h for h, key in (("special", keys.HIDE_SPECIAL), ("first", keys.HIDE_FIRST)) if session.get(key))
    link = links.Link(model=_picked_model(keys.MODEL_CHOICE, keys.MODEL_OTHER), text=session.get(keys.TEXT) or None,
                      hide=hide, ours=bool(session.get(keys.LOCAL_ATTENTION)),
                      contributions=session.get(keys.LENS) == keys.LENS_CONTRIBUTIONS, dtype=state.precision())
    default = links.Link(text=state.DEFAULT_TEXT, dtype="auto")  # a link states any other precision: servers differ
    run = cur.run
    if run is None or cur.stale or seq2seq_views.is_cross(run):  # another input's run, or no token axis of its own
        return link, default
    row, head = int(session.get(keys.SEL_LAYER, 0)), int(session.get(keys.SEL_HEAD, 0))
    default = links.Link(text=state.DEFAULT_TEXT, layer=run.layer_ids[0], head=0,
                         detail=_default_detail(run.n), dtype="auto")
    fields = {}
    if 0 <= row < run.num_layers:
        fields["layer"] = run.layer_ids[row]
    if 0 <= head < run.num_heads:
        fields["head"] = head
    if page_id == HEAD_VIEW:
        fields["detail"] = DETAIL_SLUGS.get(session.get(keys.HEAD_DETAIL))
    if page_id == COMPARE:
        fields.update(_compare_fields())
        default = replace(default, compare="texts", text_b=compare_views.DEFAULT_TEXT_B)
    return replace(link, **fields), default


def _compare_fields() -> dict:
    """The Compare page's mode and run B as `links.Link` fields (what its widgets hold)."""
    slug = {mode: slug for slug, mode in compare_views.MODES.items()}.get(session.get(keys.CMP_MODE), "texts")
    if slug == "texts":
        return {"compare": slug, "text_b": session.get(keys.CMP_TEXT_B) or None}
    return {"compare": slug, "model_b": _picked_model(keys.CMP_MODEL_B, keys.CMP_OTHER_B),
            "ours_b": bool(session.get(keys.CMP_LOCAL_B))}


def _base_url(url_path: str) -> str:
    """The app's address without the page (st.context.url holds the current page's path), or ""
    when the browser did not say (the link is then relative to the server)."""
    here = (st.context.url or "").rstrip("/")
    suffix = f"/{url_path}" if url_path else ""
    return here[: -len(suffix)] if suffix and here.endswith(suffix) else here


def share(page, cur: state.Current) -> None:
    """After the page has drawn: the URL's query parameters follow the view (defaults left out),
    and the sidebar's *Share* box shows the link with a *Copy link* button."""
    page_id = page.url_path or pages.DEFAULT  # the default page's own path is "" (st.Page)
    link, default = current(page_id, cur)
    params = links.encode(link, default=default)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)
    with st.sidebar:
        st.header("Share")
        st.caption("**Copy link**: the button at the right of the box copies the link to this view "
                   "(page, model, text, head and options; on Compare, also run B).")
        st.code(links.url(_base_url(page.url_path), page.url_path, params), language=None, wrap_lines=True)
        if link.text and not links.text_fits(link.text):
            st.caption(f"The text is too long to share by link ({len(link.text):,} characters, at most "
                       f"{links.MAX_TEXT_CHARS:,}): the link opens on the default text.")
