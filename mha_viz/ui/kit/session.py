"""This session's state: the one module that touches `st.session_state`.

Every key is a name in `ui/kit/keys.py` (tests/unit/test_ui_house.py checks each call here and each
widget's `key=`). Widgets keep their own values under their keys; what the app itself keeps
between runs (the last good run, a result, a pending link) goes through `put` and `get`.
`settle` writes a widget's value only when it differs: a value written by code replaces what the
browser shows, including what the user is typing.
"""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st


def get(key: str, default: Any = None) -> Any:
    """The value under `key`, or `default` when there is none."""
    return st.session_state.get(key, default)


def need(key: str) -> Any:
    """The value under `key`, which must be there (a widget drawn earlier in this run): KeyError if not."""
    return st.session_state[key]


def put(key: str, value: Any) -> None:
    st.session_state[key] = value


def pop(key: str, default: Any = None) -> Any:
    """Remove `key`; its value, or `default` when there was none."""
    return st.session_state.pop(key, default)


def setdefault(key: str, value: Any) -> Any:
    """`value` under `key` unless something is there already; what is there now."""
    return st.session_state.setdefault(key, value)


def start_at(key: str, value: Any, fits: Callable[[Any], bool] | None = None) -> None:
    """The widget `key` opens on `value` where it holds nothing, or (`fits`) a value this run does not allow: the
    default a widget is drawn with, set here instead of passed to the widget (Streamlit warns, with a stack in the
    server's log, of a widget given a default whose key a link, a lesson step or a callback also set)."""
    if key not in st.session_state or (fits is not None and not fits(st.session_state[key])):
        st.session_state[key] = value


def settle(key: str, value: Any) -> None:
    """Give the widget `key` this value before it is drawn (a range or an option the run allows),
    writing only when it differs: a value written by code replaces what the browser shows,
    including what the user is typing."""
    if st.session_state.get(key) != value:
        st.session_state[key] = value


def put_all(names: tuple[str, ...], values) -> None:
    """Each key its value, in order (`put_all((keys.SEL_LAYER, keys.SEL_HEAD), picked)`)."""
    for key, value in zip(names, tuple(values), strict=True):
        st.session_state[key] = value
