"""A page's own controls as link parameters: what a link and a lesson step carry besides the model,
text, head and sidebar options of `mha_viz.export.link_params` (the token in focus, the metric, the
window, a page's toggles…).

A `Control` names one parameter (the app names it after the widget it sets) and says what it may
hold: `read` turns a link's text into the value a widget takes, or raises `ValueError` with words
for the user; `write` is the way back. Bounds that depend on the run on screen (a token position,
a layer row, a head) are named by `upto` and checked by the app once the run exists (`within`).
The app declares its pages' controls (`mha_viz.ui.kit.page_controls`); nothing here imports streamlit.

How a value is written: a flag ``1`` or ``0`` (or its own two words: ``ours`` and ``hf``); a choice as its
option; a number as digits (``0.25``); a span ``start-stop``; picks ``3,5,8``; a text as typed (spaces kept: an
answer token " Mary"); a model as the sidebar's ``model`` is (a bundled name, a hub id, a folder), checked against
the server's models where the link is read (`link_params.parse`).
A control's parameter is its session key unless it names one of its own (`param`: the pair's ``corrupted``,
the circuit's ``k``, Compare's ``text_b``: names that links carried before they were controls). A control carried
only while another holds one value (`only_when`: Compare's sentence B in its mode ``texts``) is written only then.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

FLAG, CHOICE, NUMBER, SPAN, PICKS, TEXT, MODEL = "flag", "choice", "number", "span", "picks", "text", "model"
LOCAL = "local"  # an input of the page that no link carries (`local`): its `why` says why
TOKENS, LAYERS, HEADS = "tokens", "layers", "heads"  # what the run bounds a position by (`upto`)
MAX_CHARS = 200  # the longest value a control's parameter may hold
MAX_MODEL_CHARS = 300  # the longest model name or folder (a MODEL control's, the link's own ``model``)
MAX_PICKS = 64
_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")
_INT = re.compile(r"-?[0-9]{1,9}")
_FLOAT = re.compile(r"-?[0-9]{1,9}(\.[0-9]{1,9})?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Control:
    """One control of a page, as a link parameter.

    `options` (CHOICE, PICKS): the values it may take, str or int; empty: any short text (the page
    checks it against what its run offers). `low`, `high` (NUMBER, SPAN, PICKS of numbers): fixed
    bounds, inclusive; `integer`: whole numbers. `upto`: a bound of the run on screen (TOKENS,
    LAYERS or HEADS): a position or a pick below it, a span's stop at most it. `default`: what the
    page opens on, a value or a function of the app's current state that gives it (a shared link
    leaves a control at its default out); None: always written. A LOCAL control (`local`) is an input of
    the page that no link or lesson step carries: `why` says why (a preset that acts once, an upload, a parameter
    the link has of its own); `carried` is False for it alone. A TEXT holds what was typed, at most `high`
    characters, spaces kept. A MODEL names a model (`link_params.parse` checks it against the server's models).
    `param`: the link parameter's name when it is not the session key's (`link_name`); `words`: what a notice
    calls it (default: `link_name`). A FLAG's `options`, when given, are its (on, off) words. `only_when`
    (a control's name, a value): carried only while that control holds that value.
    """

    name: str
    kind: str
    options: tuple = ()
    low: float | None = None
    high: float | None = None
    integer: bool = True
    upto: str | None = None
    default: Any = None
    why: str = ""
    param: str = ""
    words: str = ""
    only_when: tuple = ()

    @property
    def link_name(self) -> str:
        """The link parameter that carries it: `param`, else its session key."""
        return self.param or self.name

    @property
    def said(self) -> str:
        """What a notice calls it: `words`, else its link parameter."""
        return self.words or self.link_name

    @property
    def carried(self) -> bool:
        """Whether links and lesson steps carry it (every kind but LOCAL)."""
        return self.kind != LOCAL

    def read(self, text: str) -> Any:
        """The value a link's `text` gives; ValueError, whose message completes "The link's NAME
        “text” …", when it gives none."""
        if self.kind == TEXT:  # as typed: spaces are part of it (a token's leading space), newlines too
            if len(str(text)) > self.high:
                raise ValueError(f"has more than the {int(self.high):,} characters a link may carry")
            if not str(text).strip():
                raise ValueError("is empty")
            return str(text)
        text = str(text).strip()
        if self.kind == MODEL:
            if not text or len(text) > MAX_MODEL_CHARS or _CONTROL.search(text):
                raise ValueError("is not a model name")
            return text
        if len(text) > MAX_CHARS or _CONTROL.search(text):
            raise ValueError("is not a value this control takes")
        if self.kind == FLAG:
            on, off = self.options or ("1", "0")
            if text.lower() in (on, *_TRUE) or text.lower() in (off, *_FALSE):
                return text.lower() in (on, *_TRUE)
            raise ValueError(f"is not “{on}” or “{off}”" if self.options else "is not 1 (on) or 0 (off)")
        if self.kind == CHOICE:
            return self._option(text)
        if self.kind == NUMBER:
            return self._number(text)
        if self.kind == SPAN:
            start, sep, stop = text.partition("-") if not text.startswith("-") else ("", "", "")
            if not sep:
                raise ValueError("is not a span start-stop")
            first, last = self._number(start), self._number(stop)
            if first >= last:
                raise ValueError("is not a span start-stop with start below stop")
            return first, last
        if self.kind == PICKS:
            parts = [p for p in text.split(",") if p.strip()]
            if len(parts) > MAX_PICKS:
                raise ValueError(f"picks more than {MAX_PICKS}")
            return [self._option(p.strip()) if self.options or not self.integer else self._number(p)
                    for p in parts]
        raise ValueError("is not a value this control takes")

    def _option(self, text: str) -> Any:
        if not self.options:
            if not text:
                raise ValueError("is empty")
            return text
        for option in self.options:
            if str(option) == text:
                return option
        shown = ", ".join(map(str, self.options[:8])) + (", …" if len(self.options) > 8 else "")
        raise ValueError(f"is not one of {shown}")

    def _number(self, text: str) -> int | float:
        text = text.strip()
        if not (_INT if self.integer else _FLOAT).fullmatch(text):
            raise ValueError("is not a whole number" if self.integer else "is not a number")
        value = int(text) if self.integer else float(text)
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(f"is not between {_number_text(self.low)} and {_number_text(self.high)}")
        return value

    def write(self, value: Any) -> str | None:
        """`value` as a link's text, or None when it is not a value of this control (not written)."""
        try:
            text = self._write(value)
            if text is not None:
                self.read(text)
            return text
        except (ValueError, TypeError, OverflowError):
            return None

    def _write(self, value: Any) -> str | None:
        if self.kind == FLAG:
            on, off = self.options or ("1", "0")
            return (on if value else off) if isinstance(value, bool) else None
        if self.kind == CHOICE:
            return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        if self.kind == NUMBER:
            return _number_text(value) if _is_number(value) else None
        if self.kind == SPAN:
            if isinstance(value, (tuple, list)) and len(value) == 2 and all(map(_is_number, value)):
                return f"{_number_text(value[0])}-{_number_text(value[1])}"
            return None
        if self.kind == PICKS:
            if isinstance(value, (tuple, list)) and all(not isinstance(v, bool) for v in value):
                return ",".join(str(v) for v in value)
        if self.kind in (TEXT, MODEL):
            return value if isinstance(value, str) and value.strip() else None
        return None

    def within(self, value: Any, size: int) -> bool:
        """Whether `value` fits a run whose `upto` count (tokens, layers or heads) is `size` (a
        negative number, where `low` allows one, stands for "none": it always fits)."""
        if self.upto is None:
            return True
        if self.kind == SPAN:
            return 0 <= value[0] < value[1] <= size
        if self.kind == PICKS:
            return all(isinstance(v, int) and 0 <= v < size for v in value)
        return not isinstance(value, int) or value < size


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number_text(value: float | None) -> str:
    if value is None:
        return "any"
    if float(value).is_integer():
        return str(int(value))
    return f"{float(value):.6f}".rstrip("0").rstrip(".")


def flag(name: str, default: bool | None = False, *, param: str = "", states: tuple[str, str] = (),
         only_when: tuple = ()) -> Control:
    """On or off (a toggle, a checkbox), written ``1`` or ``0``, or as its `states` (on, off): ``ours``, ``hf``."""
    return Control(name, FLAG, options=tuple(states), default=default, param=param, only_when=tuple(only_when))


def choice(name: str, options: Sequence = (), default: Any = None, *, param: str = "") -> Control:
    """One of `options` (a radio, a select box); no options: any short text the page checks."""
    return Control(name, CHOICE, options=tuple(options), default=default, param=param)


def model(name: str, *, param: str = "", words: str = "", only_when: tuple = ()) -> Control:
    """A model as the sidebar names one (a bundled name, a hub id, a folder): always written where carried, and
    checked against the server's models where a link is read, as the link's own ``model`` is."""
    return Control(name, MODEL, param=param, words=words, only_when=tuple(only_when))


def number(name: str, low: float | None = None, high: float | None = None, *, integer: bool = True,
           upto: str | None = None, default: Any = None, param: str = "") -> Control:
    """A number between `low` and `high` (a slider, a number box); `upto`: below the run's count too."""
    return Control(name, NUMBER, low=low, high=high, integer=integer, upto=upto, default=default, param=param)


def text(name: str, most: int, *, param: str = "", words: str = "", default: str | None = None,
         only_when: tuple = ()) -> Control:
    """What was typed in a text box, at most `most` characters (a longer one is not written, nor read); an empty
    box, or one holding `default`, is left out of a link."""
    return Control(name, TEXT, high=most, param=param, words=words, default=default, only_when=tuple(only_when))


def span(name: str, upto: str | None = TOKENS, default: Any = None) -> Control:
    """A range (start, stop) of positions (a range slider): 0 <= start < stop <= the run's count."""
    return Control(name, SPAN, low=0, upto=upto, default=default)


def picks(name: str, options: Sequence = (), *, upto: str | None = None, text: bool = False,
          default: Any = None) -> Control:
    """Several of `options`, or with `upto` positions below the run's count (a multiselect, pills);
    `text`: any short texts the page checks (no comma in them)."""
    return Control(name, PICKS, options=tuple(options), low=0, integer=not text, upto=upto, default=default)


def local(why: str, *names: str) -> tuple[Control, ...]:
    """Inputs of the page that no link or lesson step carries, one control each, and `why` not (what they are
    instead: a preset that acts once, an upload, the link's own parameters, a value set afresh for each run)."""
    if not why:
        raise ValueError(f"say why no link carries {', '.join(names)}")
    return tuple(Control(name, LOCAL, why=why) for name in names)


def head_pickers(layer: str, head: str) -> frozenset[str]:
    """A page's *Layer* and *Head* pickers of the shared head (`shared_head.pick_head`), for its NOT_KEPT: inputs
    drawn without persist_state=KEEP (tests/unit/test_ui_house.py), since they are set from the kept SEL_LAYER /
    SEL_HEAD before they are drawn."""
    return frozenset({layer, head})


def tokens_of(cur) -> int:
    """Every token of the run on screen `cur` (the UI's current state), hidden ones included (positions are the
    model's): what a control's default reads."""
    return (cur.full_run or cur.run).n


def last_shown(cur) -> int:
    """The last token the run on screen shows (the last one kept when tokens are hidden)."""
    hidden = getattr(cur.run, "hidden", None)
    return int(hidden.kept[-1]) if hidden is not None else cur.run.n - 1


def first_shown(cur) -> int:
    """The first token the run on screen shows."""
    hidden = getattr(cur.run, "hidden", None)
    return int(hidden.kept[0]) if hidden is not None else 0
