"""Which charts Plotly draws twice because their margins were too small (a diagnostic for issue 59, not a test).

Streamlit's theme turns on `automargin` for every axis: Plotly draws a chart, measures what its tick labels, axis
titles, colour bars and legend need, and when that is more than the figure's margins it draws the chart again with
larger ones (on Head similarity that second drawing was 0.3-0.5 s of the page's 0.7 s). This opens every page of
the app in Chromium on one setup of `benchmarks/pages.py` and prints, for each chart, its margins as sent, what
Plotly settled on, and the sides it had to grow: a chart with none is drawn once.

Run: `.venv/bin/python benchmarks/margins.py [--setup sentence|minilm|smollm2] [--pages "Head view,…"]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pages  # noqa: E402 - beside this script: the setups and the session they open
from app_server import free_port, start_server, stop_server  # noqa: E402 - beside this script
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 - the e2e page driver

SIDES = ("l", "r", "t", "b")
READ = """() => Array.from(document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')).map(el => ({
  title: ((el.layout.title || {}).text || '').replace(/<br>/g, ' ').slice(0, 60),
  base: el.layout.margin || {}, size: el._fullLayout._size}))"""


def grown(chart: dict) -> dict[str, int]:
    """{side: px} Plotly added to a chart's margin (its automargin's second drawing)."""
    return {s: round(chart["size"][s] - chart["base"].get(s, 80)) for s in SIDES
            if chart["size"][s] - chart["base"].get(s, 80) > 0.5}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", default="sentence", choices=list(pages.SETUPS))
    parser.add_argument("--pages", default="", help="comma-separated page titles (default: every page)")
    args = parser.parse_args()
    port = free_port()
    log = Path(tempfile.gettempdir()) / "mha-viz-margins-server.log"
    proc = start_server(port, log)
    base_url = f"http://127.0.0.1:{port}"
    twice = 0
    try:
        pages.wait_health(proc, base_url, log)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            ui, _ = pages.setup_session(browser, base_url, args.setup, pages.SETUPS[args.setup][2] or pages.long_text())
            wanted = [p.strip() for p in args.pages.split(",") if p.strip()]
            for title, _link in pages.nav_links(ui):
                if wanted and title not in wanted:
                    continue
                ui.goto(title)
                ui.page.wait_for_timeout(500)  # automargin's second drawing, after the first
                for chart in ui.page.evaluate(READ):
                    more = grown(chart)
                    twice += bool(more)
                    base = {s: chart["base"].get(s) for s in SIDES}
                    size = {s: round(chart["size"][s]) for s in SIDES}
                    print(f"{title:24} {'TWICE' if more else 'once ':5} {chart['title'][:44]:44} sent {base} "
                          f"drawn {size} grew {more}")
            browser.close()
    finally:
        stop_server(proc)
    print(f"{twice} charts drawn twice")


if __name__ == "__main__":
    main()
