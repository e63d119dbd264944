"""The session keys of the page *Model facts*: its download of the facts, which no link or lesson carries (the page
has no control that shapes its view)."""

from __future__ import annotations

DL_FACTS = "dl_facts"
