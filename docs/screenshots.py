"""The README's screenshots, taken from the running app so that they stay true: starts
`streamlit run app.py` on a free port, opens each view in Debian's Chromium through PyPI's
playwright (never `playwright install`), and saves small palette PNGs in docs/images/.

    HF_HUB_OFFLINE=1 .venv/bin/python docs/screenshots.py [--only head_view,lines]

Needs the bundled models, `playwright` and /usr/bin/chromium (or $MHA_VIZ_CHROMIUM). About two
minutes on 2 idle cores, most of it patching SmolLM2's 270 heads for the last picture.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PIL import Image

from mha_viz.launch import free_port, health

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
CHROMIUM = os.environ.get("MHA_VIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]
WIDTH = 1280  # the window; each shot sets its height
COLOURS = 128  # palette size: heatmaps keep their gradient, the files stay a few tens of KB
BOOT_TIMEOUT_S = 300  # the server imports its libraries and loads minilm before it answers
RUN_TIMEOUT_S = 600  # patching 270 heads of smollm2 on a busy 2-core machine
MAIN = "[data-testid=stMain]"
TEXT = "The animal didn't cross the street because it was too tired."
# '' when the app is idle (as tests/e2e/conftest.py's IDLE_PROBE), else what is busy
IDLE_PROBE = """() => {
    const status = Array.from(document.querySelectorAll('[data-testid=stStatusWidget]'))
        .map(e => e.innerText).join(' ');
    const busy = /Running|Stop/.test(status);
    const skeletons = document.querySelectorAll('[data-testid=stSkeleton]').length;
    const stale = document.querySelectorAll('[data-stale=true]').length;
    const main = document.querySelector('[data-testid=stMain]') ? 1 : 0;
    return (busy || skeletons || stale || !main) ? 'busy' : '';
}"""


@dataclass(frozen=True)
class Shot:
    """One picture: the app opened on `link` in a window `height` pixels tall, then
    `prepare(page)` if any; the main area (with the sidebar: the whole window) is kept from the
    top of the element `anchor` (a selector) down."""

    name: str
    link: str
    anchor: str = f"{MAIN} h1"
    height: int = 800
    with_sidebar: bool = False
    prepare: Callable | None = None


def _link(page: str, **params: str) -> str:
    return f"/{page}?" + urllib.parse.urlencode(params)


def _choose(page, label: str, option: str) -> None:
    """Pick `option` in the main area's selectbox labelled `label`, and wait for the rerun."""
    combo = page.locator(f"{MAIN} input[role=combobox][aria-label={json.dumps(label)}]")
    combo.click()
    combo.fill(option)
    page.get_by_role("option", name=option, exact=True).click()
    _settle(page)


def _focus_it(page) -> None:
    """Line view: layer 3, the lines out of the query "it" (token 10 of TEXT)."""
    _choose(page, "Layer", "3")
    _choose(page, "Focus token (or click a token in the chart)", "10: it")


def _find_the_heads(page) -> None:
    """Heads behind a prediction on smollm2: the IOI preset, the estimate, then every head patched."""
    _choose(page, "Preset", "Indirect object (names swapped)")
    page.locator(MAIN).get_by_role("button", name="Find the heads", exact=True).click()
    page.locator("[data-testid=stAlertContentSuccess]").filter(has_text="m = logit").wait_for(
        timeout=RUN_TIMEOUT_S * 1000)
    page.locator(MAIN).get_by_role("button", name="Patch every head for real", exact=True).click()
    page.locator("[data-testid=stAlertContentInfo]").filter(has_text="Estimate against real patching").wait_for(
        timeout=RUN_TIMEOUT_S * 1000)


def _sidebar_at_lesson(page) -> None:
    """The sidebar scrolled to its *Lesson* controls (Step k of N, Back, Next), below the pages' list."""
    page.locator("[data-testid=stSidebar] h2").filter(has_text="Lesson").first.evaluate(
        "el => el.scrollIntoView({block: 'start'})")


SHOTS = [
    Shot("model-view", "/?" + urllib.parse.urlencode({"model": "minilm", "text": TEXT}), with_sidebar=True),
    Shot("head-view", _link("head_view", model="minilm", text=TEXT, layer="3", head="1"), height=880),
    Shot("line-view", _link("lines", model="minilm", text=TEXT), anchor=f"{MAIN} [data-testid=stPlotlyChart]",
         height=560, prepare=_focus_it),
    Shot("head-metrics", _link("head_metrics", model="minilm", text=TEXT), height=790),
    # from the grids down: the summary above them starts with an emoji, a blank box in a Chromium
    # without an emoji font
    # a student following the bundled lesson: Step k of N in the sidebar, the note above the view
    Shot("lesson", "/?" + urllib.parse.urlencode({"lesson": "attention-head-by-head", "step": "3"}), height=900,
         anchor=".st-key-lesson_note_box", with_sidebar=True, prepare=_sidebar_at_lesson),
    Shot("prediction", _link("prediction", model="smollm2"), anchor=f"{MAIN} [data-testid=stPlotlyChart]",
         height=1900, prepare=_find_the_heads),
]


@contextmanager
def app_server(log_path: Path):
    """`streamlit run app.py` from the checkout on a free loopback port, in its own process
    group; yields its base URL once it answers its health check, and stops the group after."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.headless", "true", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none", "--server.address", "127.0.0.1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while health(base_url) != "ok":
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the app did not start (log: {log_path})")
            time.sleep(0.5)
        yield base_url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _settle(page, timeout_s: float = RUN_TIMEOUT_S) -> None:
    """Until the app has been idle for three polls in a row, then a moment for Plotly to draw."""
    page.wait_for_timeout(500)  # a rerun just started shows as busy within this
    deadline, quiet = time.monotonic() + timeout_s, 0
    while quiet < 3:
        quiet = 0 if page.evaluate(IDLE_PROBE) else quiet + 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"the app was still busy after {timeout_s} s")
        page.wait_for_timeout(200)
    page.wait_for_timeout(1000)


# scrolls the element's scrolling ancestor so that the element sits below Streamlit's header
SCROLL_TO = """el => {
    el.scrollIntoView({block: 'start'});
    let box = el.parentElement;
    while (box && !(box.scrollHeight > box.clientHeight && /(auto|scroll)/.test(getComputedStyle(box).overflowY)))
        box = box.parentElement;
    (box || document.scrollingElement).scrollBy(0, -80);
}"""


def _clip(page, shot: Shot) -> dict:
    """The region to keep: the main area (or the whole window), from the anchor down."""
    anchor = page.locator(shot.anchor).first
    anchor.evaluate(SCROLL_TO)
    page.mouse.move(0, 0)  # no hover label or chart toolbar in the picture
    page.wait_for_timeout(500)
    top = max(0, anchor.bounding_box()["y"] - 16) if not shot.with_sidebar else 0
    left = 0 if shot.with_sidebar else page.locator(MAIN).first.bounding_box()["x"] + 1
    return {"x": left, "y": top, "width": WIDTH - left, "height": shot.height - top}


def save_small(png: bytes, path: Path) -> int:
    """The screenshot as a palette PNG (COLOURS colours, no dithering), optimised; its size."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    small = image.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)
    return path.stat().st_size


def take(browser, base_url: str, shot: Shot) -> int:
    context = browser.new_context(viewport={"width": WIDTH, "height": shot.height}, device_scale_factor=1)
    context.set_default_timeout(RUN_TIMEOUT_S * 1000)
    try:
        page = context.new_page()
        page.goto(base_url + shot.link, wait_until="domcontentloaded")
        page.locator(f"{MAIN} [data-testid=stPlotlyChart], {MAIN} [data-testid=stButton]").first.wait_for()
        _settle(page)
        if shot.prepare is not None:
            shot.prepare(page)
            _settle(page)
        errors = page.locator("[data-testid=stException], [data-testid=stAlertContentError]").all_inner_texts()
        if errors:
            raise RuntimeError(f"{shot.name}: the app shows an error: {errors}")
        png = page.screenshot(clip=_clip(page, shot))
        return save_small(png, IMAGES / f"{shot.name}.png")
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated shot names (default: all)")
    args = parser.parse_args(argv)
    wanted = set(filter(None, args.only.split(",")))
    shots = [s for s in SHOTS if not wanted or s.name in wanted]
    if unknown := wanted - {s.name for s in SHOTS}:
        parser.error(f"unknown shots: {', '.join(sorted(unknown))}")

    from playwright.sync_api import sync_playwright

    IMAGES.mkdir(parents=True, exist_ok=True)
    log = Path(tempfile.gettempdir()) / "mha-viz-screenshots.log"  # $TMPDIR where it is set
    with app_server(log) as base_url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            total = 0
            for shot in shots:
                start = time.monotonic()
                size = take(browser, base_url, shot)
                total += size
                print(f"{shot.name}.png: {size / 1024:.0f} KB ({time.monotonic() - start:.0f} s)", flush=True)
            print(f"total: {total / 1024:.0f} KB")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
