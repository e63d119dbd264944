"""Page switch and in-page choice times (a benchmark, not a test; issue 59): every click of the app
timed from the click to its last chart drawn, with its timeline, against a bare Streamlit twin of
the page measured in the same run.

Run: `.venv/bin/python benchmarks/pages.py [--setups sentence,minilm,smollm2] [--repeat 3]
[--pages "Head view,Compare heads"] [--against ../before]` (tens of minutes on 2 busy cores with every setup and
page). `--against` names another checkout (a git worktree of the commit before a change): its app is served too and
clicked the same way in the same run, setup by setup, in sessions ordered after, before, before, after (a drift of
the machine's load counts on both), and each page's median time is printed as a ratio after / before (target: none
over 1.10; `pages_report.print_against`).
Needs PyPI's `playwright` and a Chromium at /usr/bin/chromium (or $MHA_VIZ_CHROMIUM);
`playwright install` is never used.

It starts its own `streamlit run app.py` (with MHA_VIZ_RUN_TRACE: each run of the script is written
to a trace file, mha_viz.ui.shell.run_trace) and `streamlit run` of a copy of benchmarks/bare_app.py.txt
(the bare twin: no mha_viz, `st.navigation`, a sidebar text area) on free loopback ports, and one headless Chromium.

1. cold start: from the server first answering /_stcore/health to the first chart of the default
   page drawn. Target: at most 5 s.
2. per setup, a fresh session: `sentence`: MiniLM, one short sentence; `minilm`: MiniLM, Token
   limit 512, a long English text (the views use 512 tokens); `smollm2`: SmolLM2 (its first load,
   not timed, converts the GGUF file), Token limit 256, the same long text; `smollm2-8k` (only when
   named): SmolLM2 at 8,192 tokens, a long run that keeps no head whole (issue 52), its text applied
   (the run computed) before any click is timed. The text is applied on
   Model facts (the analysis is computed then, not timed); every page (or those of --pages) is
   opened once in the navigation's order (first visit), then --repeat more rounds (second visits,
   the median is reported); then the in-page choices, each twice (there and back): another head
   in the Head view, another token in Token focus, the rescale toggle of Compare heads, and each
   part of the Teaching page.
3. the bare twin: its pages draw the same number, sizes and kinds of charts (a line view's lines
   too) and the same tables (rows × columns) as each page drew (random data; benchmarks/timeline.py
   reads them from the page), and are clicked the same way
   (an in-page choice: its Seed box). Each time is printed as a ratio to its twin's.

A click's timeline (benchmarks/timeline.py): the click; each run of the script with its start and
end (a click that runs the script twice pays twice); each websocket message (bytes, arrival at
the browser's network layer); each chart's `plotly_afterplot`. Its time runs to the later of the
page going idle (no Running status, no skeleton, no stale element, three polls of 20 ms) and its
last chart drawn.

Targets (issue 59): every page's second visit ≤ 2 × its twin, first ≤ 4 ×; in-page choices ≤ 2 ×.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pages_report  # noqa: E402 - beside this script
import timeline  # noqa: E402 - beside this script
from app_server import free_port, health, start_server, stop_server  # noqa: E402 - beside this script
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

from tests.e2e.conftest import CHROMIUM, CHROMIUM_PLAIN_ARGS, NAV_LINK, App  # noqa: E402 - the e2e page driver

BOOT_TIMEOUT_S = 120
LOAD_TIMEOUT_S = 240  # a run that loads a model (smollm2 converts its GGUF file on a first load)
SENTENCE = "The animal didn't cross the street because it was too tired."
SETUPS = {"sentence": ("minilm", 512, SENTENCE), "minilm": ("minilm", 512, None), "smollm2": ("smollm2", 256, None),
          "smollm2-8k": ("smollm2", 8192, None)}  # the last: a long run (issue 52), not in the default set
DEFAULT_SETUPS = ("sentence", "minilm", "smollm2")
REFERENCE = "Model facts"
COLD_TARGET_S = 5.0
TEACHING = "Teaching: step by step"
TEACH_PARTS = ("3–6 · Scores to probabilities", "7–9 · Output", "What it costs", "Demonstrations",
               "1–2 · Input, Q, K, V")  # the page opens on the last one: each is opened, then again
# in-page choices: (page, what, the widget's label)
CHOICES = (("Head view", "another head", "Head"), ("Token focus", "another token", "Token in focus (query)"),
           ("Compare heads", "rescale toggle", "Rescale each head to its own maximum"))


def wait_health(proc: subprocess.Popen, base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while health(base_url, timeout=1) != "ok":
        if proc.poll() is not None:
            sys.exit(f"streamlit exited with {proc.returncode}; see {log_path}")
        if time.monotonic() > deadline:
            sys.exit(f"streamlit did not answer {base_url}/_stcore/health within {BOOT_TIMEOUT_S} s; see {log_path}")
        time.sleep(0.05)


# -- measuring ------------------------------------------------------------------------------------
def long_text(tokens: int = 512) -> str:
    """English prose, well over `tokens` for every bundled model: the bundled corpus sample's first 60
    sentences (about 800 words), or, past 512 tokens, the sample's sentences over and over until there are
    as many words as tokens (a word is at least one token)."""
    from mha_viz import corpus

    texts = corpus.read_texts("sample")
    if tokens <= 512:
        return " ".join(texts[:60])
    out, words = [], 0
    while words < tokens:
        out.append(texts[len(out) % len(texts)])
        words += len(out[-1].split())
    return " ".join(out)


def cold_start(browser, base_url: str, proc: subprocess.Popen, log_path: Path) -> tuple[float, float, float]:
    """(health answered after the launch, first chart after health, idle after health), in s."""
    launched = time.perf_counter()
    wait_health(proc, base_url, log_path)
    answered = time.perf_counter()
    ui = timeline.new_app(browser, base_url, "cold")
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


def setup_session(browser, base_url: str, setup: str, text: str) -> tuple[App, int]:
    """A session on the model, token limit and text of `setup`; (app, tokens shown)."""
    key, tokens = SETUPS[setup][:2]
    import mha_viz_models

    ui = timeline.new_app(browser, base_url, setup)
    ui.page.goto(base_url + "/", wait_until="domcontentloaded")
    ui.page.locator("[data-testid=stMain] [data-testid=stPlotlyChart]").first.wait_for(timeout=LOAD_TIMEOUT_S * 1000)
    ui.wait_idle(LOAD_TIMEOUT_S)
    if key != "minilm":
        ui.choose_model(key)  # the model loads now (untimed)
        ui.wait_idle(LOAD_TIMEOUT_S)
        if not ui.model_title() or not mha_viz_models.BUNDLED[key].title.startswith(ui.model_title()):
            raise RuntimeError(f"could not switch to {key}: the picker shows {ui.model_title()!r}")
    ui.goto(REFERENCE)
    limit = ui.page.locator("[data-testid=stSidebar] [data-testid=stNumberInput]").filter(
        has=ui.page.get_by_text("Token limit", exact=True)).locator("input")
    if limit.input_value() != str(tokens):
        ui.choose("Token limit", str(tokens), scope="[data-testid=stSidebar]")
    ui.set_text(text)
    ui.wait_idle(LOAD_TIMEOUT_S)
    problems = ui.exceptions() + ui.alerts("Error")
    if problems:
        raise RuntimeError(f"{key}: the app shows errors after applying the text: {problems}")
    ui.goto("Model view")
    caption = " ".join(ui.page.locator("[data-testid=stMain] [data-testid=stCaptionContainer]").all_inner_texts())
    match = re.search(r"(\d+) tokens", caption)
    return ui, int(match.group(1)) if match else -1



# -- clicking -------------------------------------------------------------------------------------
BARE_START = "Start"  # the bare twin's first page (bare_app.py.txt's START): open first, never measured


def nav_links(ui: App) -> list[tuple[str, str]]:
    """(title, url path) of every page in the navigation, in order."""
    return [(title, urllib.parse.urlsplit(urllib.parse.urljoin(ui.page.url, href)).path.rstrip("/"))
            for title, href in ui.nav_pages()]


def nav_link(ui: App, title: str, section: str):
    """The link to `title` in the top navigation, its section's menu opened."""
    link = ui.page.locator(NAV_LINK).filter(has=ui.page.get_by_text(title, exact=True))
    if not link.count():
        ui.page.locator("[data-testid=stTopNavSection]").filter(has_text=section).click()
        link.wait_for()
    return link


def switch(ui: App, title: str, path: str, section: str, trace: Path) -> dict:
    link = nav_link(ui, title, section)
    return timeline.timed(ui, link.click, path=path, title_before=ui.heading(), trace=trace, what=title)


def choose_other(ui: App, label: str, back_to: str | None, trace: Path, what: str) -> tuple[dict, str]:
    """Pick another option (or `back_to`) in the selectbox `label` of the main area; (timeline, the
    option shown before)."""
    combo = ui.page.locator(f"[data-testid=stMain] input[role=combobox][aria-label={label!r}]".replace("'", '"'))
    before = combo.input_value()
    combo.click()
    options = ui.page.get_by_role("option")
    options.first.wait_for()
    if back_to is None:
        texts = options.all_inner_texts()
        option = options.nth(next(i for i, t in enumerate(texts) if t.strip() != before))
    else:
        combo.fill(back_to)
        option = ui.page.get_by_role("option", name=back_to, exact=True)
    return timeline.timed(ui, option.click, trace=trace, what=what), before


def flip(ui: App, label: str, trace: Path, what: str) -> dict:
    toggle = ui.page.locator("[data-testid=stMain] [data-testid=stCheckbox]").filter(has_text=label).locator("label")
    return timeline.timed(ui, toggle.first.click, trace=trace, what=what)


def twice(ui: App, kind: str, label: str, trace: Path, what: str) -> list[dict]:
    """The choice made, then undone: [there, back]."""
    if kind == "toggle":
        return [flip(ui, label, trace, what), flip(ui, label, trace, what)]
    there, before = choose_other(ui, label, None, trace, what)
    return [there, choose_other(ui, label, before, trace, what)[0]]


def part(ui: App, label: str, trace: Path) -> dict:
    button = ui.page.locator("[data-testid=stMain] [data-testid=stButtonGroup] button").filter(has_text=label)
    button.wait_for()
    return timeline.timed(ui, button.click, trace=trace, what=f"Teaching, {label}")


def visits(ui: App, links: list[tuple[str, str]], sections: dict[str, str], repeat: int, trace: Path,
           name: str) -> tuple[dict, dict]:
    """Every page of `links` opened once, then `repeat` rounds more: (first, [seconds]) by title."""
    first, second = {}, {title: [] for title, _ in links}
    for round_ in range(repeat + 1):
        for title, path in links:
            r = switch(ui, title, path, sections[title], trace)
            (second[title].append(r) if round_ else first.__setitem__(title, r))
            print(f"  {name} {'first' if not round_ else 'again'} {title:26s} {r['s']:6.2f} s", file=sys.stderr,
                  flush=True)
    return first, second


def measure(browser, base_url: str, setup: str, text: str, repeat: int, only: set[str], trace: Path) -> dict:
    from mha_viz.ui.shell.navigation import PAGES

    sections = {p.title: p.section for p in PAGES}
    ui, tokens = setup_session(browser, base_url, setup, text)
    try:
        links = [(t, p) for t, p in nav_links(ui) if not only or t in only or t == REFERENCE]
        ui.goto(REFERENCE)  # so that the first page is a switch too
        links = [link for link in links if link[0] != REFERENCE] + [link for link in links if link[0] == REFERENCE]
        first, second = visits(ui, links, sections, repeat, trace, setup)
        choices = {}
        for page, what, label in CHOICES:
            if page in dict(links):
                switch(ui, page, dict(links)[page], sections[page], trace)
                choices[page] = twice(ui, "toggle" if "toggle" in what else "select", label, trace, f"{page}, {what}")
        parts = {}
        if TEACHING in dict(links):
            switch(ui, TEACHING, dict(links)[TEACHING], sections[TEACHING], trace)
            for _ in range(2):
                for label in TEACH_PARTS:
                    parts.setdefault(label, []).append(part(ui, label, trace))
    finally:
        ui.close()
    return {"setup": setup, "tokens": tokens, "links": links, "sections": sections, "first": first,
            "second": second, "choices": choices, "parts": parts, "whats": {page: what for page, what, _ in CHOICES}}


def measure_twin(browser, bare_url: str, spec_path: Path, r: dict, repeat: int, trace: Path) -> dict:
    """The bare twin of every page and part `r` measured: its pages written to `spec_path`, then
    visited and clicked as the app's were (an in-page choice: the twin's Seed box, twice)."""
    pages = [timeline.twin_spec(t, r["sections"][t], r["first"][t]) for t, _ in r["links"]]
    pages += [timeline.twin_spec(f"{TEACHING} · {label}", r["sections"][TEACHING], runs[-1])
              for label, runs in r["parts"].items()]
    timeline.write_spec(spec_path, pages)
    sections = {p["title"]: p["section"] for p in pages}
    ui = timeline.new_app(browser, bare_url, f"bare-{r['setup']}")
    try:
        ui.page.goto(bare_url + "/", wait_until="domcontentloaded")
        ui.page.locator("[data-testid=stMain] h1").first.wait_for(timeout=LOAD_TIMEOUT_S * 1000)
        ui.wait_idle()
        links = [(title, path) for title, path in nav_links(ui) if title != BARE_START]
        first, second = visits(ui, links, sections, repeat, trace, "bare " + r["setup"])
        choices = {}
        for title, path in links:
            switch(ui, title, path, sections[title], trace)
            choices[title] = twice(ui, "select", "Seed", trace, f"bare {title}, seed")
    finally:
        ui.close()
    return {"first": first, "second": second, "choices": choices}



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", default=",".join(DEFAULT_SETUPS),
                        help="comma-separated, of: " + ", ".join(SETUPS))
    parser.add_argument("--repeat", type=int, default=3, help="rounds of second visits; the median is reported")
    parser.add_argument("--pages", default="", help="comma-separated page titles (default: every page; "
                                                    f"{REFERENCE} always)")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout (the commit before a change) served and measured the same way")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "mha-viz-pages-server.log",
                        help="the server's log (the bare twin's: the same name with -bare)")
    args = parser.parse_args()
    setups = [s.strip() for s in args.setups.split(",") if s.strip()]
    unknown = [s for s in setups if s not in SETUPS]
    if unknown or not setups:
        parser.error(f"unknown setup(s) {unknown}; choose from {', '.join(SETUPS)}")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        sys.exit(f"no Chromium at {CHROMIUM} (set MHA_VIZ_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    only = {p.strip() for p in args.pages.split(",") if p.strip()}
    work = Path(tempfile.mkdtemp(prefix="mha-viz-pages-"))
    trace, bare_trace, spec = work / "runs.txt", work / "bare-runs.txt", work / "twin.json"
    repeat, verdicts, load_before = max(1, args.repeat), [], os.getloadavg()[0]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_PLAIN_ARGS)
        port, bare_port = free_port(), free_port()
        base_url, bare_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{bare_port}"
        bare_log = args.log.with_name(args.log.stem + "-bare" + args.log.suffix)
        proc = start_server(port, args.log, MHA_VIZ_RUN_TRACE=str(trace))
        other = other_url = None
        if args.against is not None:
            other_port = free_port()
            other_url, other_log = f"http://127.0.0.1:{other_port}", args.log.with_name(args.log.stem + "-before"
                                                                                          + args.log.suffix)
            other = start_server(other_port, other_log, root=args.against.resolve(),
                                 MHA_VIZ_RUN_TRACE=str(work / "before-runs.txt"))
        # the twin's script is kept as text (only app.py and mha_viz/ui may use Streamlit), run from a copy
        twin = spec.with_name("bare_app.py")
        twin.write_text((Path(__file__).with_name("bare_app.py.txt")).read_text())
        bare = start_server(bare_port, bare_log, script=str(twin), MHA_VIZ_RUN_TRACE=str(bare_trace),
                            BARE_TWIN_SPEC=str(spec))
        try:
            boot, drawn, idle = cold_start(browser, base_url, proc, args.log)
            print(f"cold start: health answered {boot:.1f} s after launch; first Model view chart drawn "
                  f"{drawn:.2f} s after that (idle after {idle:.2f} s); target ≤ {COLD_TARGET_S:g} s")
            verdicts.append((f"cold start ≤ {COLD_TARGET_S:g} s (health → first chart)", f"{drawn:.2f} s",
                             drawn <= COLD_TARGET_S))
            wait_health(bare, bare_url, bare_log)
            if other is not None:
                wait_health(other, other_url, other_log)
            for setup in setups:
                print(f"\n{setup}: opening a session, applying the text… (load {os.getloadavg()[0]:.1f})", flush=True)
                text = SETUPS[setup][2] or long_text(SETUPS[setup][1])
                result = measure(browser, base_url, setup, text, repeat, only, trace)
                twin = measure_twin(browser, bare_url, spec, result, repeat, bare_trace)
                verdicts += pages_report.print_setup(result, twin, repeat, SETUPS[setup][:2])
                if other is not None:  # sessions in the order after, before, before, after: a drift counts on both
                    print(f"\n{setup}: the same on {args.against}, twice, then this checkout again…", flush=True)
                    before = [measure(browser, other_url, setup, text, repeat, only, work / "before-runs.txt")
                              for _ in range(2)]
                    after = [result, measure(browser, base_url, setup, text, repeat, only, trace)]
                    verdicts += pages_report.print_against(pages_report.pooled(after), pages_report.pooled(before),
                                                           str(args.against))
        finally:
            stop_server(proc)
            stop_server(bare)
            if other is not None:
                stop_server(other)
            browser.close()
    print_verdicts(verdicts, target_width=52, value_width=60,
                   where=f"{os.cpu_count()} CPUs, browser and both servers on the same machine; 1-minute load "
                         f"average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
