"""Page switch times (a benchmark, not a test): how long each page of the sidebar takes to draw,
on a first and on a second visit, against the Model facts page measured in the same session.

Run: `.venv/bin/python benchmarks/pages.py [--setups minilm,smollm2] [--repeat 3]` (about 5-8
minutes on 2 CPU cores with both setups; smollm2's first load converts its GGUF file, ~30 s).
Needs PyPI's `playwright` and a Chromium at /usr/bin/chromium (or $MHA_VIZ_CHROMIUM);
`playwright install` is never used.

It starts its own `streamlit run app.py` on a free loopback port (own process group, always
stopped at the end) and one headless Chromium (launched before the server, so that the cold
start below does not count the browser's own start).

1. cold start: from the server first answering /_stcore/health (polled every 50 ms) to the
   first Plotly chart of the default page (the Model view grid) drawn in the browser, which opens
   the app the moment the health check answers. Target: at most 5 s.
2. per setup, a fresh session (browser context):
   - minilm: the default model, Token limit 512, a long English text (the first sentences of the
     bundled corpus sample, well over 512 tokens: the views use 512);
   - smollm2: picked in the sidebar's Model box (its first load, not timed, converts the GGUF
     file), Token limit 256, the same text (the views use 256).
   The text and limit are applied on the Model facts page (the analysis itself, which every
   page shares, is computed then, not timed); then every page of the navigation is opened once in
   the sidebar's order (first visit), then `--repeat` more rounds in the same order (second
   visits; the median per page is reported). Corpus and Generate compute only on a button: their
   time is the page opening. Model view and Model facts were drawn once before (the session
   opens on the Model view; the text is applied on Model facts) with the default text: their
   "first visit" is their first one with this text.
   Then the Teaching page, which draws one part at a time (a group of steps, the costs, the
   demonstrations), has each part opened twice in turn (from the click on its button to idle),
   against the same target and the same Model facts second visit.

A page's time runs from the click on its nav link (a capturing listener in the page records
performance.now()) to the first of three consecutive idle polls (every 20 ms, inside the page:
the rerun was seen to start (or, for a switch too quick to show a busy state, a websocket
message came and the title changed), the status widget shows no Running/Stop, no skeleton, no stale
element, the URL is the page's, its title drawn). It includes the browser building the page
(Plotly drawing). Also reported per page: the bytes the server sent over the websocket for the
switch (messages received between the click and idle) and "browser": idle time minus the arrival
of the last message (what the browser spends after the server is done sending). The websocket
messages are timed as Chromium's network layer reports them to playwright, not in the page
(whose main thread may be busy drawing): "last msg" runs from the click to the last message of
the switch, the server's part (its Python, and sending; a page whose chart sends its selection
back after drawing reruns, and "last msg" then includes that drawing too). "busy": how many
times the page was seen busy during the switch (2 or more: a second rerun).

Targets (per setup): every page at most 3 × Model facts on a second visit, at most 6 × on a
first visit.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_server import free_port, health, start_server, stop_server  # noqa: E402 - beside this script
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

from tests.e2e.conftest import (  # noqa: E402 - the e2e tests' page driver (set_text, choose…) and browser
    BUSY_OBSERVER,
    CHROMIUM,
    CHROMIUM_ARGS,
    App,
)

BOOT_TIMEOUT_S = 120
LOAD_TIMEOUT_S = 240  # a run that loads a model (smollm2 converts its GGUF file on a first load)
PAGE_TIMEOUT_S = 180  # one page switch
POLL_MS = 20
SETUPS = {"minilm": 512, "smollm2": 256}  # model key -> Token limit
REFERENCE = "Model facts"
COLD_TARGET_S, SECOND_X, FIRST_X = 5.0, 3.0, 6.0

# The e2e tests' busy counter (a rerun seen to start, however briefly), a record of the click on a
# nav link (or on a segmented control's button: the Teaching page's parts), and of every websocket
# message the page receives (arrival time and size).
INIT_JS = BUSY_OBSERVER + """
(() => {
  window.__clickAt = 0;
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('[data-testid=stTopNavDropdownLink], [data-testid=stButtonGroup] button'))
      window.__clickAt = performance.now();
  }, true);
  window.__frames = [];
  const size = (d) => typeof d === 'string' ? d.length : (d.byteLength !== undefined ? d.byteLength : (d.size || 0));
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => window.__frames.push([performance.now(), size(e.data)]));
    }
  };
})();
"""

# Resolves once the switch started after `seenBefore` is done (see the module doc): times in ms
# after the click.
WAIT_JS = """
async ([seenBefore, titleBefore, path, timeoutMs, pollMs]) => {
  const clickAt = window.__clickAt;
  const h1 = () => { const e = document.querySelector('[data-testid=stMain] h1'); return e ? e.innerText : ''; };
  let quiet = 0, firstQuiet = 0, state = '';
  while (true) {
    const status = Array.from(document.querySelectorAll('[data-testid=stStatusWidget]'))
      .map(e => e.innerText).join(' ');
    const busy = /Running|Stop/.test(status);
    const skeletons = document.querySelectorAll('[data-testid=stSkeleton]').length;
    const stale = document.querySelectorAll('[data-stale=true]').length;
    const onPage = location.pathname.replace(/\\/+$/, '') === path;
    const title = !!document.querySelector('[data-testid=stMain] h1');
    // a switch so quick that no busy state was ever rendered: the server answered, the URL and
    // the title are the new page's
    const answered = window.__frames.some(([t]) => t >= clickAt);
    const started = window.__e2eBusySeen > seenBefore || (answered && h1() !== '' && h1() !== titleBefore);
    const idle = started && !busy && !skeletons && !stale && onPage && title;
    state = `started=${started} status='${status}' skeletons=${skeletons} stale=${stale} path=${location.pathname}`;
    if (idle) { if (quiet === 0) firstQuiet = performance.now(); quiet++; } else quiet = 0;
    if (quiet >= 3) break;
    if (performance.now() - clickAt > timeoutMs) return {ok: false, state};
    await new Promise(r => setTimeout(r, pollMs));
  }
  const frames = window.__frames.filter(([t]) => t >= clickAt && t <= firstQuiet);
  const last = frames.length ? frames[frames.length - 1][0] : clickAt;
  return {ok: true, clickAt, idleAt: firstQuiet, ms: firstQuiet - clickAt, reruns: window.__e2eBusySeen - seenBefore,
          pageBytes: frames.reduce((s, [, n]) => s + n, 0), pageLastMs: last - clickAt, state};
}
"""




def wait_health(proc: subprocess.Popen, base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while health(base_url, timeout=1) != "ok":
        if proc.poll() is not None:
            sys.exit(f"streamlit exited with {proc.returncode}; see {log_path}")
        if time.monotonic() > deadline:
            sys.exit(f"streamlit did not answer {base_url}/_stcore/health within {BOOT_TIMEOUT_S} s; see {log_path}")
        time.sleep(0.05)


# -- measuring ------------------------------------------------------------------------------------
def long_text() -> str:
    """English prose, well over 512 tokens for every bundled model: the bundled corpus sample's
    first 60 sentences (about 800 words)."""
    from mha_viz import corpus

    return " ".join(corpus.read_texts("sample")[:60])


def new_app(browser, base_url: str, name: str) -> App:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    context.add_init_script(INIT_JS)
    ui = App(context.new_page(), base_url, name)
    ui.frames = []  # (this clock, bytes) of every websocket message the server sent the page
    ui.page.on("websocket", lambda ws: ws.on(
        "framereceived", lambda payload: ui.frames.append((time.perf_counter(), len(payload)))))
    return ui


def nav_links(ui: App) -> list[tuple[str, str]]:
    """(title, url path) of every page in the navigation, in order."""
    return [(title, urllib.parse.urlsplit(urllib.parse.urljoin(ui.page.url, href)).path.rstrip("/"))
            for title, href in ui.nav_pages()]


def switch(ui: App, title: str, path: str) -> dict:
    """Click the nav link of `title` and wait in the page until its run is done (WAIT_JS).

    The websocket messages are timed twice: in the page (a message listener: late when the page's
    main thread is busy drawing) and as the browser's network layer reports them to playwright
    (`framereceived`, timed here, on this script's clock, which is mapped onto the page's clock
    just before the click). "browser" is the idle time minus the arrival of the last message on
    the network side: what the page spends after the server has sent everything."""
    link = ui.nav_link(title)
    seen = ui.reruns_seen()
    title_before = ui.heading()
    before = time.perf_counter()
    page_now = ui.page.evaluate("performance.now()")
    offset = (before + time.perf_counter()) / 2 - page_now / 1000  # this clock minus the page's, s
    link.click()
    result = ui.page.evaluate(WAIT_JS, [seen, title_before, path, PAGE_TIMEOUT_S * 1000, POLL_MS])
    if not result["ok"]:
        raise RuntimeError(f"{title}: not done within {PAGE_TIMEOUT_S} s ({result['state']})")
    click, idle = result["clickAt"] / 1000 + offset, result["idleAt"] / 1000 + offset
    frames = [(t, n) for t, n in ui.frames if click <= t <= idle]
    last = frames[-1][0] if frames else click
    problems = ui.exceptions() + ui.alerts("Error")
    return {"s": result["ms"] / 1000, "bytes": sum(n for _, n in frames), "frames": len(frames),
            "reruns": result["reruns"],
            "server": last - click, "browser": idle - last, "page_last": result["pageLastMs"] / 1000,
            "problems": problems}


TEACHING = "Teaching: step by step"
TEACH_PARTS = ("3–6 · Scores to probabilities", "7–9 · Output", "What it costs", "Demonstrations",
               "1–2 · Input, Q, K, V")  # the page opens on the last one: each is opened, then again


def switch_part(ui: App, label: str, path: str) -> dict:
    """On the Teaching page, click the part `label` and wait until its run is done (as `switch`;
    the title stays, so the rerun counts as started once the server answers)."""
    button = ui.page.locator("[data-testid=stMain] [data-testid=stButtonGroup] button").filter(
        has_text=label)
    button.wait_for()
    seen = ui.reruns_seen()
    button.click()
    result = ui.page.evaluate(WAIT_JS, [seen, "", path, PAGE_TIMEOUT_S * 1000, POLL_MS])
    if not result["ok"]:
        raise RuntimeError(f"Teaching, {label}: not done within {PAGE_TIMEOUT_S} s ({result['state']})")
    return {"s": result["ms"] / 1000, "problems": ui.exceptions() + ui.alerts("Error")}


def measure_parts(ui: App, links: list[tuple[str, str]]) -> dict[str, list[dict]]:
    """Each part of the Teaching page opened twice in a row of rounds: {label: [first, second]}."""
    path = dict(links)[TEACHING]
    switch(ui, TEACHING, path)
    times = {label: [] for label in TEACH_PARTS}
    for _ in range(2):
        for label in TEACH_PARTS:
            times[label].append(switch_part(ui, label, path))
            print(f"  Teaching part {label:32s} {times[label][-1]['s']:6.2f} s", file=sys.stderr, flush=True)
    return times


def cold_start(browser, base_url: str, proc: subprocess.Popen, log_path: Path) -> tuple[float, float, float]:
    """(health answered after the launch, first chart after health, idle after health), in s."""
    launched = time.perf_counter()
    wait_health(proc, base_url, log_path)
    answered = time.perf_counter()
    ui = new_app(browser, base_url, "cold")
    try:
        ui.page.goto(base_url + "/", wait_until="commit")
        ui.page.locator("[data-testid=stMain] [data-testid=stPlotlyChart] .main-svg").first.wait_for(
            timeout=LOAD_TIMEOUT_S * 1000)
        drawn = time.perf_counter()
        ui.wait_idle(LOAD_TIMEOUT_S)
        idle = time.perf_counter()
    finally:
        ui.close()
    return answered - launched, drawn - answered, idle - answered


def setup_session(browser, base_url: str, key: str, text: str) -> tuple[App, int]:
    """A session on `key` with the token limit and text of its setup; (app, tokens shown)."""
    import mha_viz

    ui = new_app(browser, base_url, key)
    ui.page.goto(base_url + "/", wait_until="domcontentloaded")
    ui.page.locator("[data-testid=stMain] [data-testid=stPlotlyChart]").first.wait_for(timeout=LOAD_TIMEOUT_S * 1000)
    ui.wait_idle(LOAD_TIMEOUT_S)
    if key != "minilm":
        ui.choose_model(key)  # the model loads now (untimed)
        ui.wait_idle(LOAD_TIMEOUT_S)
        if ui.model_title() != mha_viz.BUNDLED[key].title:
            raise RuntimeError(f"could not switch to {key}: the picker shows {ui.model_title()!r}")
    ui.goto(REFERENCE)
    limit = ui.page.locator("[data-testid=stSidebar] [data-testid=stNumberInput]").filter(
        has=ui.page.get_by_text("Token limit", exact=True)).locator("input")
    if limit.input_value() != str(SETUPS[key]):
        ui.choose("Token limit", str(SETUPS[key]), scope="[data-testid=stSidebar]")
    ui.set_text(text)
    ui.wait_idle(LOAD_TIMEOUT_S)
    problems = ui.exceptions() + ui.alerts("Error")
    if problems:
        raise RuntimeError(f"{key}: the app shows errors after applying the text: {problems}")
    ui.goto("Model view")
    caption = " ".join(ui.page.locator("[data-testid=stMain] [data-testid=stCaptionContainer]").all_inner_texts())
    match = re.search(r"(\d+) tokens", caption)
    return ui, int(match.group(1)) if match else -1


def measure(browser, base_url: str, key: str, text: str, repeat: int) -> dict:
    ui, tokens = setup_session(browser, base_url, key, text)
    try:
        links = nav_links(ui)
        first, seconds = {}, {title: [] for title, _ in links}
        # start on the reference so that Model view (the first link) is a switch too
        ui.goto(REFERENCE)
        for title, path in links:
            first[title] = switch(ui, title, path)
            print(f"  first visit  {title:26s} {first[title]['s']:6.2f} s", file=sys.stderr, flush=True)
        for round_ in range(repeat):
            for title, path in links:
                seconds[title].append(switch(ui, title, path))
                print(f"  second visit {title:26s} {seconds[title][-1]['s']:6.2f} s (round {round_ + 1})",
                      file=sys.stderr, flush=True)
        parts = measure_parts(ui, links)
    finally:
        ui.close()
    second = {}
    for title, runs in seconds.items():
        times = sorted(r["s"] for r in runs)
        med = statistics.median(times)
        pick = sorted(runs, key=lambda r: r["s"])[len(runs) // 2]  # its bytes, times and reruns (the upper median)
        second[title] = {**pick, "s": med, "best": times[0]}
    return {"key": key, "tokens": tokens, "links": links, "first": first, "second": second, "parts": parts}


def print_setup(r: dict, repeat: int) -> list[tuple[str, str, bool]]:
    key, first, second = r["key"], r["first"], r["second"]
    ref1, ref2 = first[REFERENCE]["s"], second[REFERENCE]["s"]
    print(f"\n{key}: Token limit {SETUPS[key]}, {r['tokens']} tokens shown; second visit: median of {repeat}; "
          f"ratios to {REFERENCE} (first {ref1:.2f} s, second {ref2:.2f} s)\n")
    head = (f"| {'page':26s} | first s | second s | best s | ×facts 1st | ×facts 2nd | 2nd KiB sent | "
            f"2nd last msg s | 2nd browser s | 2nd busy | verdict |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    over1, over2 = [], []
    for title, _ in r["links"]:
        f, s = first[title], second[title]
        x1, x2 = f["s"] / ref1, s["s"] / ref2
        ok1, ok2 = x1 <= FIRST_X, x2 <= SECOND_X
        if not ok1:
            over1.append(f"{title} {x1:.1f}×")
        if not ok2:
            over2.append(f"{title} {x2:.1f}×")
        verdict = "ok" if ok1 and ok2 else ", ".join(
            w for w, bad in (("2nd > 3×", not ok2), ("1st > 6×", not ok1)) if bad)
        print(f"| {title:26s} | {f['s']:7.2f} | {s['s']:8.2f} | {s['best']:6.2f} | {x1:10.1f} | {x2:10.1f} | "
              f"{s['bytes'] / 1024:12,.0f} | {s['server']:14.2f} | {s['browser']:13.2f} | {s['reruns']:8d} | "
              f"{verdict:7s} |")
        for p in f["problems"] + s["problems"]:
            print(f"|   ! {title}: {p[:160]}")
    parts_over1, parts_over2 = [], []
    print(f"\n| {TEACHING + ', part':40s} | first s | second s | ×facts 1st | ×facts 2nd | verdict |")
    print(f"|{'-' * 42}|---------|----------|------------|------------|---------|")
    for label, (f, s) in r["parts"].items():
        x1, x2 = f["s"] / ref2, s["s"] / ref2  # a part opens within a page already there: the second visit's facts
        if x1 > FIRST_X:
            parts_over1.append(f"{label} {x1:.1f}×")
        if x2 > SECOND_X:
            parts_over2.append(f"{label} {x2:.1f}×")
        ok = x1 <= FIRST_X and x2 <= SECOND_X
        print(f"| {label:40s} | {f['s']:7.2f} | {s['s']:8.2f} | {x1:10.1f} | {x2:10.1f} | "
              f"{'ok' if ok else 'over':7s} |")
        for p in f["problems"] + s["problems"]:
            print(f"|   ! {label}: {p[:160]}")
    worst1 = max(r["links"], key=lambda link: first[link[0]]["s"])[0]
    worst2 = max(r["links"], key=lambda link: second[link[0]]["s"])[0]
    return [
        (f"every page ≤ {SECOND_X:g} × {REFERENCE}, second visit ({key})",
         (f"{len(over2)} over: " + ", ".join(over2)) if over2 else
         f"worst {worst2} {second[worst2]['s'] / ref2:.1f}×", not over2),
        (f"every page ≤ {FIRST_X:g} × {REFERENCE}, first visit ({key})",
         (f"{len(over1)} over: " + ", ".join(over1)) if over1 else
         f"worst {worst1} {first[worst1]['s'] / ref1:.1f}×", not over1),
        (f"each Teaching part ≤ {SECOND_X:g} ×, {FIRST_X:g} × ({key})",
         ", ".join(parts_over2 + parts_over1) or "worst " + max(
             (f"{lab} {s['s'] / ref2:.1f}× / {f['s'] / ref2:.1f}×" for lab, (f, s) in r["parts"].items()),
             key=lambda t: float(t.split()[-1].rstrip("×"))), not parts_over1 and not parts_over2),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", default="minilm,smollm2",
                        help="comma-separated, of: " + ", ".join(SETUPS) + " (default: both)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of second visits; the median is reported")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "mha-viz-pages-server.log",
                        help="the server's log (default: mha-viz-pages-server.log in the temporary folder)")
    args = parser.parse_args()
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    unknown = [s for s in setups if s not in SETUPS]
    if unknown or not setups:
        parser.error(f"unknown setup(s) {unknown}; choose from {', '.join(SETUPS)}")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        sys.exit(f"no Chromium at {CHROMIUM} (set MHA_VIZ_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    text = long_text()
    verdicts = []
    load_before = os.getloadavg()[0]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        proc = start_server(port, args.log)
        try:
            boot, drawn, idle = cold_start(browser, base_url, proc, args.log)
            print(f"cold start: health answered {boot:.1f} s after launch; first Model view chart drawn "
                  f"{drawn:.2f} s after that (idle after {idle:.2f} s); target ≤ {COLD_TARGET_S:g} s")
            verdicts.append((f"cold start ≤ {COLD_TARGET_S:g} s (health → first chart)", f"{drawn:.2f} s",
                             drawn <= COLD_TARGET_S))
            for key in setups:
                print(f"\n{key}: opening a session, applying the text…", flush=True)
                result = measure(browser, base_url, key, text, max(1, args.repeat))
                verdicts += print_setup(result, max(1, args.repeat))
        finally:
            stop_server(proc)
            browser.close()
    print_verdicts(verdicts, target_width=52, value_width=60,
                   where=f"{os.cpu_count()} CPUs, browser and server on the same machine; 1-minute load average "
                         f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
