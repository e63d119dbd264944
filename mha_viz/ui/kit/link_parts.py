"""What a page's link carries beyond its controls (`page_controls`): fields of a form of its own, such as
*Compare*'s run B or *Heads behind a prediction*'s pair and circuit. The page's module registers one
`LinkPart` (`register`) when it is imported, which the navigation does for every page before a session's
first run; the shell's links (`ui/shell/links.py`) then read a link into every part (`open_all`) and write the
page on screen back (`fields`, `default`) without importing any page."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mha_viz.export import link_params as links


def _same(default: links.Link) -> links.Link:
    return default


@dataclass(frozen=True)
class LinkPart:
    """A page's own link fields: `open(link)` puts them in the page's inputs before they are drawn and returns
    what it could not apply (notices); `fields()` reads them back as `Link` fields while the page is on screen;
    `default(link)` is the link the page opens on without them (what `links.encode` leaves out)."""

    page: str
    open: Callable[[links.Link], list[str]]
    fields: Callable[[], dict]
    default: Callable[[links.Link], links.Link] = _same


_PARTS: dict[str, LinkPart] = {}


def register(part: LinkPart) -> LinkPart:
    """Register `part` (one a page; registering again replaces it, as a reloaded module does)."""
    _PARTS[part.page] = part
    return part


def open_all(link: links.Link) -> list[str]:
    """Every page's part of `link` put in its inputs; what was not applied, as notices."""
    return [notice for part in _PARTS.values() for notice in part.open(link)]


def fields(page_id: str) -> dict:
    """The fields page `page_id` adds to a link of its view ({} for a page without a part)."""
    part = _PARTS.get(page_id)
    return part.fields() if part else {}


def default(page_id: str, link: links.Link) -> links.Link:
    """The link page `page_id` opens on when its own fields are left out (`link` for a page without a part)."""
    part = _PARTS.get(page_id)
    return part.default(link) if part else link
