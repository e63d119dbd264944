"""The README and the guide in docs/: every relative link reaches a file (and a heading, when it
names one), every image is committed and used, the images stay small, and the README stays a
front door."""

from __future__ import annotations

import re
import urllib.parse

from tests.helpers import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IMAGES = ROOT / "docs" / "images"
MAX_IMAGES_KB = 600
MAX_README_LINES = 200
# [text](target) and ![alt](target), outside code; a target ends at a space (an optional title) or ")"
LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _links(page) -> list[tuple[bool, str]]:
    """(is an image, target) of every Markdown link of a page, code blocks and spans left out."""
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text()))
    return [(bang == "!", target) for bang, target in LINK.findall(text)]


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page) -> set[str]:
    text = FENCE.sub("", page.read_text())
    slugs, seen = set(), {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        slugs.add(slug if n == 0 else f"{slug}-{n}")
    return slugs


def _local(target: str) -> bool:
    return not urllib.parse.urlsplit(target).scheme and not target.startswith("//")


def test_the_pages_are_the_readme_and_the_guide():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert names == {"README.md", "docs/using.md", "docs/deploying.md", "docs/speed.md", "docs/api.md",
                     "docs/architecture.md", "docs/head-metrics.md", "docs/attribution.md",
                     "docs/effective-attention.md"}


def test_every_relative_link_reaches_a_file_and_its_heading():
    broken = []
    for page in PAGES:
        for _, target in _links(page):
            if not _local(target):
                continue
            path, _, anchor = urllib.parse.unquote(target).partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)} → {target}"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif not dest.is_relative_to(ROOT):
                broken.append(f"{where}: outside the repository (a fresh clone lacks it)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where}: no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_readme_links_every_guide_page():
    linked = {(ROOT / urllib.parse.unquote(t).partition("#")[0]).resolve()
              for _, t in _links(ROOT / "README.md") if _local(t)}
    assert set(PAGES[1:]) <= linked


def test_every_image_exists_is_used_and_all_stay_small():
    used = {(page.parent / t).resolve() for page in PAGES for image, t in _links(page) if image and _local(t)}
    readme_images = [t for image, t in _links(ROOT / "README.md") if image]
    assert len(readme_images) >= 4, "the README shows the app"
    missing = sorted(str(p.relative_to(ROOT)) for p in used if not p.is_file())
    assert not missing, f"images not committed: {missing}"
    committed = set(IMAGES.glob("*.png")) | set(IMAGES.glob("*.webp"))
    unused = sorted(p.name for p in committed - used)
    assert not unused, f"images no page shows (delete them, or show them): {unused}"
    total_kb = sum(p.stat().st_size for p in committed) / 1024
    assert total_kb < MAX_IMAGES_KB, f"docs/images holds {total_kb:.0f} KB, over {MAX_IMAGES_KB} KB"


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines: move the detail to docs/"
    text = "\n".join(lines)
    for command in ("make run", "make test", "pip install", "mha-viz"):
        assert command in text
