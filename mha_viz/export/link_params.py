"""A view as a link: the query parameters that say which model, text, head and options a page shows.

`parse` reads a link's parameters into a `Link`, keeping what is valid and saying in plain notices
what it ignored; `encode` writes a `Link` back, leaving out what opening the app gives anyway;
`resolve_head` checks the layer and head against the loaded model, which only the app can do.
Nothing here imports streamlit: the app's glue is `mha_viz.ui.shell.links`.

The parameters (all optional):

- ``model``: a bundled name (minilm, smollm2, toy-induction), a hub id, or, on a local server
  with no allow-list, a folder. Always written: the default model is a server setting.
- ``text``: the sentence, at most `MAX_TEXT_CHARS` characters (a longer text is left out of the
  link, and refused in one).
- ``layer``: the model's layer number as the app shows it (not the row of a partial capture).
- ``head``: the head number.
- ``detail``: the head view's level of detail, one of `DETAILS`.
- ``hide``: ``special``, ``first``, ``template`` or a comma-separated list of them: the sidebar's *Hide tokens*
  (``template``: a chat template's own tokens).
- ``user``: a chat's user message (the sidebar's *Input*: Chat, for an instruct model), with ``system`` and ``reply``
  its optional system message and assistant's reply; each at most `MAX_TEXT_CHARS` characters. A chat link carries
  no ``text``: the text is the messages rendered with the model's chat template.
- ``mha``: ``ours`` computes with mha-viz's own multi-head attention (``hf``: the model's own).
- ``show``: ``contributions`` (value-weighted attention) or ``weights``: the sidebar's *Show attention as*.
- ``dtype``: ``float32``, ``bfloat16``, ``float16`` or ``auto``: the sidebar's *Precision*.

A page's own controls (the token in focus, the metric, the window, a second model…:
`mha_viz.export.view_params`) are parameters too, named after the widget each sets or by a name of their own
(names links carried before they were controls); `parse` reads those the caller declares (``controls``, by
parameter name) and keeps them, checked and written canonically, in `Link.page`. A control that names a model is
checked like ``model``. Each feature declares its own in its record; none is written here.

A lesson (`mha_viz.export.lesson`) is read from ``lesson`` (a bundled lesson's name, or a whole lesson
packed by `lesson.pack`) and ``step`` (from 1), before the view; `parse` lets them pass.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Mapping, Sequence

from mha_viz.export.view_params import MAX_MODEL_CHARS, MODEL, Control
from mha_viz_models import PRECISIONS

MAX_TEXT_CHARS = 1500  # most characters of text a link carries (percent-encoded, up to ~18 KB of URL)
MAX_INDEX = 9999  # a layer or head number past this is a malformed link, not a big model
DETAILS = ("tokens", "window", "blocks", "words", "subset")  # stable slugs of the head view's detail levels
HIDE = ("special", "first", "template")
MHA = {"ours": True, "hf": False}
SHOW = ("weights", "contributions")  # the sidebar's *Show attention as*
PARAMS = ("model", "text", "layer", "head", "detail", "hide", "mha", "show", "dtype", "user", "system", "reply")
CHAT = ("user", "system", "reply")  # a chat's messages: the user's, the system's, the assistant's reply
MAX_TOKEN_CHARS = 100  # a token typed (an answer, a wrong token) that a link carries
EMBED = ("embed", "embed_options")  # Streamlit's own parameters: neither ours nor unknown
LESSON = ("lesson", "step")  # a lesson and its step (`mha_viz.export.lesson`): read before the view
_SHOWN = 40  # characters of a bad value quoted back in a notice
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
_NUMBER = re.compile(r"[0-9]{1,%d}" % len(str(MAX_INDEX)))  # bounded: int() of 5,000 digits raises
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Link:
    """What a link asks for; None (or empty) for what it leaves to the app."""

    model: str | None = None
    text: str | None = None
    layer: int | None = None  # the model's layer number, as shown (run.layer_ids[row])
    head: int | None = None
    detail: str | None = None  # one of DETAILS
    hide: tuple[str, ...] = ()  # a part of HIDE, in HIDE's order
    ours: bool = False  # "Compute with our MHA"
    contributions: bool = False  # "Show attention as: contributions"
    dtype: str | None = None  # "Precision", one of PRECISIONS
    page: tuple[tuple[str, str], ...] = ()  # the page's own controls: (name, value as written), in link order
    user: str | None = None  # a chat (the sidebar's *Input*: Chat): the user's message, the system's, the reply
    system: str | None = None
    reply: str | None = None

    @property
    def chat(self) -> tuple[str, str, str] | None:
        """(user, system, reply) of a chat link, None for a text's."""
        return (self.user, self.system or "", self.reply or "") if self.user else None


def _quote(value: str) -> str:
    """A value from the link, short and on one line, for a notice (the UI escapes it)."""
    value = _CONTROL.sub(" ", value)
    return value if len(value) <= _SHOWN else value[:_SHOWN] + "…"


def _last(value: str | Sequence[str]) -> str:
    """One value per parameter: a repeated one counts by its last value, as st.query_params does."""
    if isinstance(value, str):
        return value
    values = list(value)
    return str(values[-1]) if values else ""


def text_fits(text: str, max_text: int = MAX_TEXT_CHARS) -> bool:
    """Whether a link may carry `text`."""
    return len(text) <= max_text


def chat_fits(link: "Link", max_text: int = MAX_TEXT_CHARS) -> bool:
    """Whether a link may carry its chat's messages (each within `max_text`)."""
    return all(text_fits(getattr(link, n) or "", max_text) for n in CHAT)


def _model(value: str, allowed_models: Sequence[str], public: bool,
           name: str = "model") -> tuple[str | None, str | None]:
    spec = value.strip()
    fallback = "the default model is shown" if name == "model" else f"{name} is the default"
    if not spec:
        return None, f"The link names no {name}: {fallback}."
    if len(spec) > MAX_MODEL_CHARS or _CONTROL.search(spec):
        return None, f"The link's {name} “{_quote(spec)}” is not a model name: {fallback}."
    if allowed_models and spec not in allowed_models:
        return None, (f"This server does not offer the link's {name} “{_quote(spec)}” (it offers "
                      f"{', '.join(allowed_models)}): {fallback}.")
    if public and not _HUB_ID.fullmatch(spec):
        return None, f"The link's {name} “{_quote(spec)}” is not a model name: {fallback}."
    return spec, None


def _text(name: str, text: str, max_text: int) -> tuple[str | None, str | None]:
    if not text_fits(text, max_text):
        return None, (f"The link's {name} has {len(text):,} characters, more than the {max_text:,} a "
                      f"link may carry: the default {name} is shown.")
    return (text if text.strip() else None), None


def _mha(name: str, value: str) -> tuple[bool | None, str | None]:
    choice = value.strip().lower()
    if choice in MHA:
        return MHA[choice], None
    return None, f"The link's {name} “{_quote(value)}” is not “ours” or “hf”: it was ignored."


def _index(name: str, value: str) -> tuple[int | None, str | None]:
    value = value.strip()
    if not _NUMBER.fullmatch(value) or int(value) > MAX_INDEX:
        return None, f"The link's {name} “{_quote(value)}” is not a {name} number: it was ignored."
    return int(value), None


def _slug(name: str, value: str, choices: tuple[str, ...]) -> tuple[str | None, str | None]:
    """One of `choices` (any case), or a notice naming them."""
    slug = value.strip().lower()
    if slug in choices:
        return slug, None
    named = (f"“{choices[0]}” or “{choices[1]}”" if len(choices) == 2 else f"one of {', '.join(choices)}")
    return None, f"The link's {name} “{_quote(value)}” is not {named}: it was ignored."


def _hide(value: str) -> tuple[tuple[str, ...], str | None]:
    parts = [p.strip().lower() for p in value.split(",") if p.strip()]
    bad = [p for p in parts if p not in HIDE]
    notice = (f"The link's hide “{_quote(value)}” has parts other than {' and '.join(HIDE)}: "
              "those were ignored." if bad else None)
    return tuple(h for h in HIDE if h in parts), notice


def _page(values: Mapping[str, str], controls: Mapping[str, Control], notices: list[str],
          allowed_models: Sequence[str], public: bool) -> tuple:
    """The page's controls among `values`, each checked by its control and written back canonically (a model as
    the link's ``model`` is)."""
    page = []
    for name, value in values.items():
        if name in controls and name not in PARAMS + LESSON:
            if controls[name].kind == MODEL:
                spec, notice = _model(value, allowed_models, public, controls[name].said)
                notices += [notice] if notice else []
                page += [(name, spec)] if spec else []
                continue
            try:
                written = controls[name].write(controls[name].read(value))
            except ValueError as exc:
                notices.append(f"The link's {_quote(controls[name].said)} “{_quote(value)}” {exc}: it was ignored.")
                continue
            if written is not None:
                page.append((name, written))
    return tuple(page)


def parse(params: Mapping[str, str | Sequence[str]], *, allowed_models: Sequence[str] = (),
          public: bool = False, max_text: int = MAX_TEXT_CHARS,
          controls: Mapping[str, Control] | None = None) -> tuple[Link, list[str]]:
    """The `Link` in a URL's query parameters, and one notice per part ignored.

    Never raises on what a link holds: an unknown parameter, a malformed number, a model outside
    `allowed_models` (empty: any), a folder on a `public` server, or a text over `max_text`
    characters is left out with a notice, and the rest applies. Notices quote the link's values
    raw (shortened): escape them for Markdown before showing them. Layer and head are checked
    against the model by `resolve_head`, once it is loaded; the page's `controls` (by parameter
    name) against the run by the app.
    """
    values = {str(k): _last(v) for k, v in params.items()}
    controls = controls or {}
    notices: list[str] = []
    unknown = [k for k in values if k not in PARAMS + LESSON and k not in controls and k.lower() not in EMBED]
    if unknown:
        shown = ", ".join(_quote(k) for k in unknown[:5])
        shown += f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        notices.append(f"The link has parameters this app does not know, ignored: {shown}.")
    fields: dict = {}

    def take(name: str, result) -> None:
        value, notice = result
        if notice:
            notices.append(notice)
        if value is not None:
            fields[name] = value

    if "model" in values:
        take("model", _model(values["model"], allowed_models, public))
    if "text" in values:
        take("text", _text("text", values["text"], max_text))
    for name in ("layer", "head"):
        if name in values:
            take(name, _index(name, values[name]))
    if "detail" in values:
        slug = values["detail"].strip().lower()
        if slug in DETAILS:
            fields["detail"] = slug
        else:
            notices.append(f"The link's detail “{_quote(values['detail'])}” is not one of "
                           f"{', '.join(DETAILS)}: it was ignored.")
    if "hide" in values:
        hide, notice = _hide(values["hide"])
        fields["hide"] = hide
        if notice:
            notices.append(notice)
    if "mha" in values:
        take("ours", _mha("mha", values["mha"]))
    if "show" in values:
        take("contributions", _slug("show", values["show"], SHOW))
        fields["contributions"] = fields.get("contributions") == "contributions"
    if "dtype" in values:
        take("dtype", _slug("dtype", values["dtype"], PRECISIONS))
    for name, said in zip(CHAT, ("user's message", "system message", "assistant's reply")):
        if name in values:
            take(name, _text(f"chat's {said}", values[name], max_text))
    if "user" not in fields and ("system" in fields or "reply" in fields):
        notices.append("The link's chat has no user's message: its system message and reply were ignored.")
        fields.pop("system", None)
        fields.pop("reply", None)
    if page := _page(values, controls, notices, allowed_models, public):
        fields["page"] = page
    return Link(**fields), notices


def resolve_head(link: Link, layer_ids: Sequence[int],
                 num_heads: int) -> tuple[int | None, int | None, list[str]]:
    """(row, head, notices): the link's layer as a row of a run whose rows hold the model's layers
    `layer_ids`, and its head if the model has it; None for what it does not ask or is not there."""
    notices, row, head = [], None, None
    if link.layer is not None:
        if link.layer in layer_ids:
            row = list(layer_ids).index(link.layer)
        else:
            ids = list(layer_ids)
            shown = (f"{ids[0]}–{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1))
                     else ", ".join(map(str, ids)))
            notices.append(f"The link's layer {link.layer} is not among this analysis' layers ({shown}): "
                           "it was ignored.")
    if link.head is not None:
        if link.head < num_heads:
            head = link.head
        else:
            notices.append(f"The link's head {link.head} is not one of this model's {num_heads} heads "
                           f"(0–{num_heads - 1}): it was ignored.")
    return row, head, notices


def encode(link: Link, *, default: Link = Link(), max_text: int = MAX_TEXT_CHARS) -> dict[str, str]:
    """The query parameters of `link`, leaving out what equals `default` (what opening the app
    with no parameters gives) except the models, and a text longer than `max_text`."""
    out: dict[str, str] = {}
    if link.model:
        out["model"] = link.model
    if link.text and link.text != default.text and text_fits(link.text, max_text):
        out["text"] = link.text
    if link.layer is not None and link.layer != default.layer:
        out["layer"] = str(link.layer)
    if link.head is not None and link.head != default.head:
        out["head"] = str(link.head)
    if link.detail is not None and link.detail != default.detail:
        out["detail"] = link.detail
    if link.hide:
        out["hide"] = ",".join(h for h in HIDE if h in link.hide)
    if link.ours:
        out["mha"] = "ours"
    if link.contributions:
        out["show"] = "contributions"
    if link.dtype is not None and link.dtype != default.dtype:
        out["dtype"] = link.dtype
    if link.user:  # a chat's text is its messages rendered: never the text box's
        out.pop("text", None)
        if chat_fits(link, max_text):
            out.update({n: getattr(link, n) for n in CHAT if getattr(link, n)})
    for name, value in link.page:
        if (name, value) not in default.page and name not in out:
            out[name] = value
    return out


def url(base: str, path: str, params: Mapping[str, str]) -> str:
    """`base` (scheme, host and any prefix, no trailing slash) + "/" + `path` + the query string."""
    query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote, safe=",")
    return f"{base.rstrip('/')}/{path.strip('/')}" + (f"?{query}" if query else "")
