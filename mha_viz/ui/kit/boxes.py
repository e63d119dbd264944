"""Expanders whose content is built and sent only while they are open (Streamlit's `on_change="rerun"` and
`.open`): the sidebar's Export, Share and Lesson boxes and the Head view's Links section and strongest-key table,
which every other click would otherwise compute (the section) and send again.

An expander's own open state is lost when a run ends early (`st.switch_page`, a view opening another page), so
each box also keeps what it was last (`was_open`), which its next drawing starts from.
"""

from __future__ import annotations

from mha_viz.ui.kit import session


def lazy_box(where, label: str, key: str, was_open: str, *, icon: str | None = None, expanded: bool = False):
    """An expander in `where` (st.sidebar, a column…) keyed `key`, open as it was last (`was_open`, a session
    key; `expanded` the first time); fill it only when its `.open` is True. Its lost state is put back under its
    key before it is drawn (its `expanded` stays the same: another would make it another widget)."""
    if session.get(key) is None and session.get(was_open, expanded):
        session.put(key, True)
    box = where.expander(label, icon=icon, key=key, on_change="rerun")
    session.put(was_open, box.open)
    return box
