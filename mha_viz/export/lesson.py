"""A lesson: an ordered list of steps, each one view of the app (the state a link holds) with a
note in Markdown, saved as a small JSON file that a teacher writes and a class follows.

The file::

    {"format": "mha-viz lesson", "version": 1, "title": "Attention, head by head",
     "steps": [{"page": "head_view", "view": {"model": "toy-induction", "text": "k d m x k d m x",
                "layer": "1", "head": "0"}, "note": "This head looks one token back…"}]}

`view` holds a link's query parameters (`mha_viz.export.link_params`), every one spelled out so
that a step opens the same whatever the server's defaults, the page's own controls included (the
token in focus, the metric…: `mha_viz.export.view_params`, declared by the app). `read_lesson`
refuses a file that is not one, with a message that says what is wrong and where: it never raises
anything else and never trusts a note (raw HTML is shown escaped by the app; a note with script is
refused outright), and refuses a model this machine cannot load, found cheaply (`check_spec`: a
bundled name, a folder that holds a model, a hub id, cached when the Hub is unreachable), so that a
class never lands on a model that fails.
`pack` and `unpack` carry a lesson in a link's ``lesson`` parameter. Nothing here imports streamlit.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import zlib
from dataclasses import dataclass, replace
from importlib import resources
from typing import Collection, Mapping

from mha_viz import catalogue
from mha_viz.export import link_params
from mha_viz.export.view_params import MODEL, Control
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.loading.resolve import check_spec

FORMAT = "mha-viz lesson"
VERSION = 1
MAX_BYTES = 256 * 1024  # a lesson file larger than this is refused before it is parsed
MAX_STEPS = 100
MAX_NOTE_CHARS = 6000
MAX_TITLE_CHARS = 200
MAX_PACKED_CHARS = 8000  # most characters of a lesson carried in a link (`pack`)
PACKED = "z1-"  # the prefix of a packed lesson; anything else in ``lesson`` names a lesson
_FIELDS = {"format", "version", "title", "description", "steps"}
_STEP_FIELDS = {"page", "view", "note"}
# what a note may not hold: markup that runs code, wherever a renderer might let it through
_SCRIPT = re.compile(r"<\s*/?\s*(script|iframe|object|embed|style|link|meta|base|form|svg|math)\b"
                     r"|\bon[a-z]+\s*=|javascript\s*:|vbscript\s*:|data\s*:\s*text/html", re.IGNORECASE)
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,60}")
BUNDLED_DIR = "lessons"  # the lessons shipped with the package (mha_viz/export/lessons/NAME.json)


class LessonError(ValueError):
    """A lesson file that is not one: the message says what is wrong, in words for the user."""


@dataclass(frozen=True)
class Step:
    """One step: the page `page` (a page id, also its URL path) showing `view` (a link's query
    parameters, as (name, value) pairs in the order written), with `note` (Markdown) above it."""

    page: str
    view: tuple[tuple[str, str], ...]
    note: str = ""

    @property
    def params(self) -> dict[str, str]:
        """The view as a link's query parameters."""
        return dict(self.view)

    @property
    def link(self) -> link_params.Link:
        """The view as a `Link` (parsed without an allow-list: `read_lesson` checked it), the page's
        own controls as written (the app checks each against its control and the run)."""
        known = link_params.PARAMS + link_params.LESSON
        return replace(link_params.parse(self.params)[0], page=tuple((k, v) for k, v in self.view if k not in known))


@dataclass(frozen=True)
class Lesson:
    """An ordered list of steps under a title."""

    title: str
    steps: tuple[Step, ...]
    description: str = ""

    @property
    def models(self) -> tuple[str, ...]:
        """Every model a step loads (its model, and a page's own, as Compare's model B), in order of first use."""
        seen: dict[str, None] = {}
        named = ("model", *(n for n, c in catalogue.link_controls().items() if c.kind == MODEL))
        for step in self.steps:
            for name in named:
                if step.params.get(name):
                    seen.setdefault(step.params[name], None)
        return tuple(seen)

    @property
    def pages(self) -> tuple[str, ...]:
        """Every page a step shows, in order of first use."""
        return tuple(dict.fromkeys(step.page for step in self.steps))


def step(page: str, params: Mapping[str, str], note: str = "") -> Step:
    """A `Step` from a page id, a link's query parameters and a note."""
    return Step(page=page, view=tuple((str(k), str(v)) for k, v in params.items()), note=note)


def to_dict(lesson: Lesson) -> dict:
    """The lesson as the JSON object its file holds."""
    out = {"format": FORMAT, "version": VERSION, "title": lesson.title}
    if lesson.description:
        out["description"] = lesson.description
    out["steps"] = [{"page": s.page, "view": s.params, "note": s.note} for s in lesson.steps]
    return out


def lesson_json(lesson: Lesson) -> str:
    """The lesson's file: JSON, indented, non-ASCII kept (a note in any language reads as written)."""
    return json.dumps(to_dict(lesson), indent=2, ensure_ascii=False) + "\n"


SUMMARY_CHARS = 70


def summary(note: str, chars: int = SUMMARY_CHARS) -> str:
    """A note's first line as plain words for a list of steps: Markdown's emphasis, code and formula marks and a
    heading's or quote's mark dropped (cut inside "**What one head computes.**" they would show as asterisks), an
    underscore or asterisk inside a word kept (W_Q, a formula's α_{ij}: they read "WQ", "α{ij}"), cut at a word
    within `chars`."""
    first = next((line for line in note.strip().splitlines() if line.strip()), "")
    first = re.sub(r"^\s*[#>]+", "", re.sub(r"[`$]+", "", first))
    first = re.sub(r"(^|[\s(\[])[*_]+(?=\S)", r"\1", first)  # emphasis opening a word
    words = re.sub(r"(?<=\S)[*_]+(?=$|[\s.,;:!?)\]])", "", first).split()  # and closing one
    out = ""
    for word in words:
        if len(out) + len(word) + 1 > chars:
            return out + " …"
        out = f"{out} {word}".strip()
    return out


def script_in(note: str) -> str | None:
    """The first piece of `note` that could run code in a browser (a script tag, an event handler,
    a javascript: address…), or None."""
    found = _SCRIPT.search(note)
    return found.group(0) if found else None


def _text(value, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise LessonError(f"{what} is not text.")
    if len(value) > limit:
        raise LessonError(f"{what} has {len(value):,} characters, more than {limit:,}.")
    return value


@dataclass(frozen=True)
class _Checks:
    """What a step is checked against: the app's pages, its models and its pages' controls."""

    pages: Collection[str]
    allowed_models: Collection[str]
    public: bool
    controls: Mapping[str, Control]
    check_models: bool
    allow_pickle: bool
    loadable: dict  # {model: why it cannot be loaded, or None}: each model checked once a file


def _model_refused(where: str, name: str, spec: str, checks: _Checks) -> None:
    if not checks.check_models:
        return
    if spec not in checks.loadable:
        try:
            check_spec(spec, checks.allow_pickle)
            checks.loadable[spec] = None
        except ModelLoadError as exc:
            checks.loadable[spec] = str(exc)
    if checks.loadable[spec]:
        raise LessonError(f"{where}'s {name} “{spec[:80]}” cannot be opened on this server: {checks.loadable[spec]}")


def _read_step(k: int, raw, checks: _Checks) -> Step:
    where = f"Step {k}"
    if not isinstance(raw, dict):
        raise LessonError(f"{where} is not an object with a page, a view and a note.")
    unknown = sorted(set(raw) - _STEP_FIELDS)
    if unknown:
        raise LessonError(f"{where} has fields a lesson does not have: {', '.join(map(str, unknown[:5]))}.")
    page = raw.get("page")
    if not isinstance(page, str) or page not in checks.pages:
        shown = page if isinstance(page, str) else type(page).__name__
        raise LessonError(f"{where} names the page “{shown[:60]}”, which this app does not have "
                          f"(it has {', '.join(checks.pages)}).")
    view = raw.get("view", {})
    if not isinstance(view, dict) or not all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                             for v in view.values()):
        raise LessonError(f"{where}'s view is not a set of link parameters (names and text values).")
    params = {str(k): str(v) for k, v in view.items()}
    if not params.get("model"):
        raise LessonError(f"{where}'s view names no model.")
    link, notices = link_params.parse(params, allowed_models=tuple(checks.allowed_models), public=checks.public,
                                      controls=checks.controls)
    if notices:
        raise LessonError(f"{where}'s view: {notices[0]}")
    _model_refused(where, "model", link.model, checks)
    for name, spec in link.page:  # a page's own model (Compare's model B)
        if checks.controls[name].kind == MODEL:
            _model_refused(where, checks.controls[name].said, spec, checks)
    note = _text(raw.get("note", ""), f"{where}'s note", MAX_NOTE_CHARS)
    if bad := script_in(note):
        raise LessonError(f"{where}'s note holds “{bad[:40]}”, which could run code in a browser: a note is "
                          "Markdown, and this lesson was refused.")
    return step(page, params, note)


def read_lesson(data: bytes | str, *, pages: Collection[str], allowed_models: Collection[str] = (),
                public: bool = False, controls: Mapping[str, Control] | None = None, check_models: bool = True,
                allow_pickle: bool = False) -> Lesson:
    """The lesson in a file's bytes (or text), checked against this app: every step's `page` one of
    `pages`, its view a valid link whose models are in `allowed_models` (empty: any; on a `public`
    server no folder) and, with `check_models`, can be loaded here (`check_spec`; pickled weights
    only with `allow_pickle`), its page's own parameters among `controls` (by link parameter; by default the app's,
    made from the features' records: `catalogue.link_controls`), every note free of script.
    Raises `LessonError`, whose message says what is wrong and where, for anything else; never
    another exception."""
    if len(data) > MAX_BYTES:
        raise LessonError(f"The lesson file has {len(data):,} bytes, more than the {MAX_BYTES:,} a lesson may have.")
    try:
        raw = json.loads(data.decode("utf-8-sig") if isinstance(data, bytes) else data)
    except UnicodeDecodeError:
        raise LessonError("The lesson file is not text (UTF-8).") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = f" (line {exc.lineno}, column {exc.colno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
        raise LessonError(f"The lesson file is not JSON{detail}.") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise LessonError(f"The file is not an mha-viz lesson (its “format” is not “{FORMAT}”).")
    if raw.get("version") != VERSION:
        raise LessonError(f"The lesson's version {str(raw.get('version'))[:20]} is not one this app reads "
                          f"(it reads version {VERSION}).")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise LessonError(f"The lesson has fields a lesson does not have: {', '.join(map(str, unknown[:5]))}.")
    title = _text(raw.get("title", ""), "The lesson's title", MAX_TITLE_CHARS).strip() or "A lesson"
    description = _text(raw.get("description", ""), "The lesson's description", MAX_NOTE_CHARS)
    for what, text in (("title", title), ("description", description)):
        if bad := script_in(text):
            raise LessonError(f"The lesson's {what} holds “{bad[:40]}”, which could run code in a browser.")
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps:
        raise LessonError("The lesson has no steps.")
    if len(steps) > MAX_STEPS:
        raise LessonError(f"The lesson has {len(steps)} steps, more than the {MAX_STEPS} a lesson may have.")
    controls = catalogue.link_controls() if controls is None else controls
    checks = _Checks(pages, allowed_models, public, controls, check_models, allow_pickle, {})
    return Lesson(title=title, description=description,
                  steps=tuple(_read_step(k, s, checks) for k, s in enumerate(steps, 1)))


def pack(lesson: Lesson) -> str | None:
    """The lesson as a link's ``lesson`` value (compressed, URL-safe), or None when it is longer
    than `MAX_PACKED_CHARS` (share the file, or serve it with MHA_VIZ_LESSON)."""
    body = json.dumps(to_dict(lesson), separators=(",", ":"), ensure_ascii=False).encode()
    packed = PACKED + base64.urlsafe_b64encode(zlib.compress(body, 9)).decode().rstrip("=")
    return packed if len(packed) <= MAX_PACKED_CHARS else None


def unpack(value: str) -> bytes:
    """The lesson file a `pack`ed value holds; LessonError when it holds none."""
    if not value.startswith(PACKED) or len(value) > MAX_PACKED_CHARS:
        raise LessonError("The link's lesson is not one this app wrote.")
    body = value[len(PACKED):]
    try:
        decoder = zlib.decompressobj()
        data = decoder.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)), MAX_BYTES + 1)
    except (ValueError, zlib.error):
        raise LessonError("The link's lesson is damaged (it may have been cut when it was copied).") from None
    if decoder.unconsumed_tail or not decoder.eof:
        raise LessonError("The link's lesson is damaged or too large.")
    return data


def is_name(value: str) -> bool:
    """Whether a link's ``lesson`` value names a lesson (a bundled one) rather than carrying one."""
    return bool(_NAME.fullmatch(value))


def bundled() -> dict[str, str]:
    """The lessons shipped with mha-viz: name -> the file's text."""
    return dict(_bundled())


@functools.cache
def _bundled() -> tuple[tuple[str, str], ...]:
    """Read once per process: the package's files do not change while it runs."""
    folder = resources.files("mha_viz.export").joinpath(BUNDLED_DIR)
    return tuple((f.name.removesuffix(".json"), f.read_text(encoding="utf-8"))
                 for f in sorted(folder.iterdir(), key=lambda f: f.name) if f.name.endswith(".json"))
