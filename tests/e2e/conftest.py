"""End-to-end fixtures: one `streamlit run app.py` server and one headless Chromium (`browser`, a profile on disk)
for the whole session (a process's: under xdist, one process runs every browser test, tests/scheduling.py), and
one tab (one Streamlit session) per test module, `shared_app`, replaced by a
fresh one after a failing test; `App` drives the page and waits for the app's reruns.

The tests need PyPI's `playwright` and a Chromium at /usr/bin/chromium (or $MHA_VIZ_CHROMIUM);
`playwright install` is never used. Without them the tests are skipped, except under CI
(CI=true), where they fail: a CI run must not go green without its browser tests.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from mha_viz import settings
from mha_viz.launch import free_port, health
from tests.helpers import SUITE_ONLY_ENV
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = os.environ.get("MHA_VIZ_CHROMIUM", "/usr/bin/chromium")
# --disable-dev-shm-usage: containers often have a 64 MB /dev/shm. The last three put every tab of the one site the
# tests open (the app) in one renderer process (whose V8 likely keeps what it compiled for the next tab; not
# checked): the browser tests alone took 491 s against 569 s, the machine's CPU 584 against 713 CPU-s, Chromium's
# 370 against 472 (stop 119, 60 tests, one process on 2 cores). Tabs driven at once (students) share that
# renderer's thread. The benchmarks, which stand for people each with their own browser, take CHROMIUM_PLAIN_ARGS.
CHROMIUM_PLAIN_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                       "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
CHROMIUM_ARGS = [*CHROMIUM_PLAIN_ARGS, "--disable-site-isolation-trials",
                 "--disable-features=site-per-process,IsolateOrigins", "--renderer-process-limit=1"]
# the server answering its health check: it first imports the pages' libraries and loads the
# default model (app.py's st.App, preload.lifespan), ~10 s on 2 idle cores, minutes on a busy one
BOOT_TIMEOUT_S = 240
RUN_TIMEOUT_S = 240  # one rerun of the app; the first load of smollm2 converts its GGUF file (~30 s)
RERUN_START_S = 5  # the most an action waits for the rerun it starts to show (it shows in < 0.5 s)
IDLE_POLLS, IDLE_POLL_MS = 3, 150  # idle: this many polls in a row, this far apart (`App.wait_idle`)
# Counts the moments the page turns busy (a rerun: the status widget says Running, or elements
# are marked stale), however briefly, so that a wait after an action never mistakes the calm
# before the rerun for its end. The status widget shows Running only after a run has taken 500 ms,
# and a page switch replaces its elements rather than marking them stale, so a short rerun may
# show neither: the server's own word is counted too, from the session's WebSocket. Every script
# run starts with a ForwardMsg new_session (field 4) and ends with a script_finished (field 6),
# also when stopped early for another rerun (streamlit/runtime/app_session.py); a top-level scan
# of each message's protobuf fields counts the starts, and a run is under way while the last of the two seen was
# a start. (Not starts minus ends: after the Stop and Cancel buttons of three tests the count stayed at one run
# under way for 240 s on an idle page, a start without its end; a runner the session replaced is not listened to,
# app_session.py's "non-current ScriptRunner". Until stop 85 the scan misread
# every length-delimited field, `i += varint()` adding to i as it was before the length, so it counted fields 4
# and 6 in the deltas' bytes: 6 starts and 27 ends for one run, and the running term never held a wait.)
BUSY_OBSERVER = """
(() => {
  window.__e2eBusySeen = 0;
  window.__e2eRunsStarted = 0;
  window.__e2eRunning = false;
  let busy = false;
  const check = (records) => {
    const status = document.querySelector('[data-testid=stStatusWidget]');
    let now = !!(status && /Running|Stop/.test(status.innerText))
              || !!document.querySelector('[data-stale=true]');
    for (const r of records) {  // stale and fresh again within one batch of mutations
      if (r.attributeName === 'data-stale' && r.oldValue === 'true') now = true;
    }
    if (now && !busy) window.__e2eBusySeen++;
    busy = now;
  };
  new MutationObserver(check).observe(document, {subtree: true, childList: true, characterData: true,
                                                 attributes: true, attributeOldValue: true,
                                                 attributeFilter: ['data-stale']});
  const fields = (bytes) => {  // the field numbers at a protobuf message's top level
    const out = [];
    let i = 0;
    const varint = () => {
      let value = 0, scale = 1, b;
      do { b = bytes[i++]; value += (b & 0x7f) * scale; scale *= 128; } while (b & 0x80 && i < bytes.length);
      return value;
    };
    while (i < bytes.length) {
      const key = varint(), wire = key % 8;
      out.push(Math.floor(key / 8));
      if (wire === 0) varint();
      else if (wire === 1) i += 8;
      else if (wire === 2) { const length = varint(); i += length; }  // not `i += varint()` (see above)
      else if (wire === 5) i += 4;
      else break;  // groups: not in Streamlit's messages
    }
    return out;
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      window.__e2eRunning = false;  // a new connection: no run of the old one to wait for
      this.addEventListener('message', (event) => {
        if (!(event.data instanceof ArrayBuffer)) return;
        const seen = fields(new Uint8Array(event.data));
        if (seen.includes(4)) { window.__e2eRunsStarted++; window.__e2eRunning = true; }
        if (seen.includes(6)) window.__e2eRunning = false;
      });
    }
  };
})();
"""
# '' when the app is idle (no 'Running'/'Stop' status, no skeleton placeholder, no stale element, no
# script run under way by BUSY_OBSERVER), else what is busy
IDLE_PROBE = """() => {
    const status = Array.from(document.querySelectorAll('[data-testid=stStatusWidget]'))
        .map(e => e.innerText).join(' ');
    const busy = /Running|Stop/.test(status);
    const skeletons = document.querySelectorAll('[data-testid=stSkeleton]').length;
    const stale = document.querySelectorAll('[data-stale=true]').length;
    const app = document.querySelector('[data-testid=stMain]') ? 1 : 0;
    const running = window.__e2eRunning ? 1 : 0;  // BUSY_OBSERVER
    return (busy || skeletons || stale || !app || running) ?
        `status='${status}' skeletons=${skeletons} stale=${stale} main=${app} running=${running}` : '';
}"""
# a chart's tick labels on one axis (evaluated on the chart's element, with the axis): [text, position]
TICKS_PROBE = """(el, axis) =>
    Array.from(el.querySelectorAll(`g.${axis}tick text`)).map(t => {
        const r = t.getBoundingClientRect();
        return [t.textContent, axis === 'x' ? r.x + r.width / 2 : r.y + r.height / 2];
    })"""
# the screen position of point `index` of a chart's trace `curve` (plotly.js decodes the typed arrays into
# _fullData; d2l reads a category axis's label or a linear axis's number alike)
CURVE_POINT = """(el, [index, curve]) => {
    const gd = el.querySelector('.js-plotly-plot');
    const fl = gd._fullLayout, box = gd.getBoundingClientRect(), trace = gd._fullData[curve];
    return [box.left + fl._size.l + fl.xaxis.l2p(fl.xaxis.d2l(trace.x[index])),
            box.top + fl._size.t + fl.yaxis.l2p(fl.yaxis.d2l(trace.y[index]))];
}"""
COLLECTED_AT = time.time()  # this process's collection; under xdist, every process collects at the start
NAV_LINK = "[data-testid=stTopNavDropdownLink]"  # a page's link in a section's menu of the top navigation
NAV_SECTION = "[data-testid=stTopNavSection]"  # a section of the top navigation (its menu opens on a click)
ZW = "\u200b"  # mha_viz.drawing.style.axis_labels: a zero-width suffix that makes repeated tokens distinct labels


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing() -> list[str]:
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("the Python package playwright is not installed (pip install -r requirements-dev.txt)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set MHA_VIZ_CHROMIUM)")
    return missing


@pytest.fixture(scope="session")
def e2e_ready() -> None:
    missing = _missing()
    if missing:
        reason = "end-to-end browser tests need: " + "; ".join(missing)
        if _in_ci():
            pytest.fail(reason + " (CI=true: these tests must run in CI)", pytrace=False)
        pytest.skip(reason)


def _log_tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server's whole process group: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=20)


def streamlit_command(port: int) -> list[str]:
    """`streamlit run app.py` from the checkout, on `port` of the loopback interface."""
    return [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
            "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none", "--server.address", "127.0.0.1"]


@contextmanager
def start_server(log_path: Path, command=streamlit_command, cwd: Path = ROOT, **env: str):
    """A new server (`command(port)`, by default `streamlit run app.py`) on a free loopback port,
    started in `cwd`, in its own process group, its output in `log_path`, with `env` added to its
    environment (the suite's own settings, SUITE_ONLY_ENV, left out); yields its base URL once it
    answers its health check (no session has run the script yet; the server's start has imported
    the pages' libraries and loaded the default model), and stops it (the whole group) on the way out. The
    environment is the launcher's as to OpenMP (a server started by hand with `streamlit run` spins unbounded)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    deployed = {k: v for k, v in os.environ.items() if k not in SUITE_ONLY_ENV}  # as deployed (tests/helpers.py)
    # OpenMP's spin bounded as the `mha-viz` launcher bounds it (`settings.openmp_spin`): its servers share the cores
    env = {**deployed, **settings.openmp_spin(deployed), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **env}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command(port), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def healthy() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}:\n{_log_tail(log_path)}", pytrace=False)
            return health(base_url) == "ok"

        if not wait_until(healthy, BOOT_TIMEOUT_S, interval_s=0.25):
            pytest.fail(f"streamlit did not answer {base_url}/_stcore/health within "
                        f"{BOOT_TIMEOUT_S} s:\n{_log_tail(log_path)}", pytrace=False)
        yield base_url
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def server_log() -> Path:
    """The shared server's log: artifacts/server.log, or server-gw0.log … under xdist, named by the process that
    runs the browser tests (one: tests/scheduling.py)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return ARTIFACTS / (f"server-{worker}.log" if worker else "server.log")


@pytest.fixture(scope="session")
def server(e2e_ready, _models, server_log) -> str:
    """The shared server (`start_server`, log in `server_log`); its base URL.
    (_models: the test process loads its models while the server starts.)"""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):  # this session's screenshots only (not another process's, taken since)
        try:
            if old.stat().st_mtime < COLLECTED_AT:
                old.unlink()
        except FileNotFoundError:  # the other process's server fixture took it first
            pass
    with start_server(server_log) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def _playwright(e2e_ready):
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        yield pw
    finally:
        pw.stop()


@pytest.fixture(scope="session")
def browser(_playwright, tmp_path_factory):
    """The Chromium every tab of the tests opens in (`new_app`): one profile on disk (playwright's persistent
    context), whose tabs share its caches of the app's scripts. A Streamlit session is a tab's (its WebSocket), not
    a context's. A tab here cost 19 % less of Chromium's CPU than a tab of a launched browser's one context, whose
    caches are kept in memory (3.9 against 4.9 CPU-s a tab landing, typing a sentence and opening the Head view,
    3 × 6 tabs each, stop 112; V8's code cache on disk is the likely reason, not checked). Tests that need contexts
    apart (their own cookies, routes) take `isolated_browser`."""
    context = _playwright.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, args=CHROMIUM_ARGS,
        viewport={"width": 1400, "height": 1000})
    try:
        context.set_default_timeout(30_000)
        context.add_init_script(BUSY_OBSERVER)
        yield context
    finally:
        context.close()


@pytest.fixture(scope="session")
def isolated_browser(_playwright):
    """A launched Chromium for the tests whose pages need contexts of their own (`new_context`): students with
    cookies apart, a page whose every request is routed."""
    launched = _playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_FAILED] = True
    return report


def new_app(browser, base_url: str, name: str) -> "App":
    """A new tab of `browser` (the fixture), not opened yet (`page.goto` starts its Streamlit session)."""
    return App(browser.new_page(), base_url, name, own_context=False)


def open_app(browser, base_url: str, name: str) -> "App":
    """A fresh Streamlit session in a new tab, on the first render of the app."""
    ui = new_app(browser, base_url, name)
    try:
        ui.page.goto(base_url + "/", wait_until="domcontentloaded")
        ui.page.locator("[data-testid=stPlotlyChart]").first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
        ui.wait_idle()
    except BaseException:
        ui.close()
        raise
    return ui


def open_link(browser, base_url: str, name: str, link: str, *, ready: str = "[data-testid=stPlotlyChart]") -> "App":
    """A fresh session opened on `link` (a path and query after the server's address, e.g.
    "/head_view?model=minilm"), once `ready` (a selector) has drawn and the app is idle. A link
    is read on a session's first run only, so each link needs its own session."""
    ui = new_app(browser, base_url, name)
    try:
        ui.page.goto(base_url + link, wait_until="domcontentloaded")
        ui.page.locator(ready).first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
        ui.wait_idle()
    except BaseException:
        ui.close()
        raise
    return ui


def _screenshot_if_failed(request, ui: "App") -> None:
    if request.node.stash.get(_FAILED, False):
        try:
            ui.shot("FAILED")
        except Exception:  # noqa: BLE001 - a failed screenshot must not hide the failure
            pass


@pytest.fixture(scope="module")
def _module_app(server, browser):
    holder = {}
    try:
        yield holder
    finally:
        if "ui" in holder:
            holder["ui"].close()


@pytest.fixture
def shared_app(request, server, browser, _module_app):
    """The app in a tab shared by the tests of one module (a page load costs seconds): each test
    gets it with its dialog and JavaScript-error records cleared; after a failure the next
    test gets a new tab and session."""
    ui = _module_app.get("ui")
    if ui is None or ui.page.is_closed():
        ui = _module_app["ui"] = open_app(browser, server, request.node.name)
    ui.test_name = App.safe_name(request.node.name)
    ui.dialogs.clear()
    ui.page_errors.clear()
    try:
        yield ui
    finally:
        if request.node.stash.get(_FAILED, False):
            _screenshot_if_failed(request, ui)
            _module_app.pop("ui").close()


# a Plotly title's text, its lines (tspan.line, one per <br>) joined by a space
TITLE_LINES = """el => {
    const lines = Array.from(el.querySelectorAll('tspan.line'));
    return lines.length ? lines.map(t => t.textContent).join(' ') : el.textContent;
}"""

class App:
    """The app in one browser tab: waiting for reruns, driving widgets, reading charts."""

    def __init__(self, page, base_url: str, test_name: str, *, own_context: bool = True):
        self.page, self.base_url, self.own_context = page, base_url, own_context
        self.test_name = self.safe_name(test_name)
        self.dialogs: list[str] = []
        self.page_errors: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))

    @staticmethod
    def safe_name(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:80]

    def close(self) -> None:
        """Closes the tab, and its context where it had one of its own (a benchmark's cold session)."""
        (self.page.context if self.own_context else self.page).close()

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        try:
            dialog.dismiss()
        except Exception:  # noqa: BLE001 - the page may already be gone
            pass

    # -- waiting ------------------------------------------------------------------------------
    def reruns_seen(self) -> int:
        """How many times the page has been seen busy, however briefly, plus how many script runs the
        server has started for it (BUSY_OBSERVER): grows once a rerun has started, however short."""
        return self.page.evaluate("() => (window.__e2eBusySeen || 0) + (window.__e2eRunsStarted || 0)")

    def wait_idle(self, timeout_s: float = RUN_TIMEOUT_S) -> None:
        """Until the app is idle: no 'Running'/'Stop' status, no skeleton placeholder, no stale
        element and no script run under way (IDLE_PROBE), three polls in a row."""
        deadline, quiet, state = time.monotonic() + timeout_s, 0, ""
        while True:
            state = self.page.evaluate(IDLE_PROBE)
            quiet = 0 if state else quiet + 1
            if quiet == IDLE_POLLS:  # no wait after the last poll (0.15 s a call, until stop 80)
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the app did not become idle within {timeout_s} s ({state})")
            self.page.wait_for_timeout(IDLE_POLL_MS)

    def rerun(self, action) -> None:
        """Do `action` (which makes the app rerun), wait until the rerun has been seen to start
        (or at most RERUN_START_S: an action that changes nothing starts none), then until idle."""
        self.started(action)()

    def started(self, action):
        """Do `action` (which makes the app rerun); returns the wait of `rerun`, to call later (several
        sessions' actions done at once, then each waited for)."""
        before = self.reruns_seen()
        action()
        deadline = time.monotonic() + RERUN_START_S

        def settle() -> None:
            while self.reruns_seen() == before and time.monotonic() < deadline:
                self.page.wait_for_timeout(50)
            self.wait_idle()
        return settle

    def wait_until(self, probe, expected, timeout_s: float = 30):
        """Poll `probe()` until it equals `expected`; the last value otherwise (for the assert)."""
        deadline = time.monotonic() + timeout_s
        value = probe()
        while value != expected and time.monotonic() < deadline:
            self.page.wait_for_timeout(150)
            value = probe()
        return value

    # -- widgets -------------------------------------------------------------------------------
    @property
    def text_box(self):
        return self.page.locator("[data-testid=stSidebar] textarea[aria-label=Sentence]")

    def set_text(self, text: str) -> None:
        """Put `text` in the sidebar's Sentence box and apply it (st.text_area: Ctrl+Enter); nothing to do where
        the box holds `text` already, applied (an unchanged box starts no rerun: `rerun` would wait RERUN_START_S)."""
        box = self.text_box
        # the "Press Ctrl+Enter to apply" hint: shown while the box holds what the server has not been sent
        hint = self.page.locator("[data-testid=stSidebar] [data-testid=InputInstructions]")
        if box.input_value() == text and not hint.count():
            self.wait_idle()
            return

        def apply() -> None:
            box.fill(text)
            box.press("Control+Enter")
            hint.wait_for(state="hidden")  # the value is sent to the server

        self.rerun(apply)

    def nav_link(self, title: str):
        """The top navigation's link to the page `title`, its section's menu opened (a link of a
        menu exists only while the menu is open)."""
        from mha_viz.ui.shell.navigation import PAGES

        link = self.page.locator(NAV_LINK).filter(has=self.page.get_by_text(title, exact=True))
        if not link.count():
            section = next(p.section for p in PAGES if p.title == title)
            self.page.locator(NAV_SECTION).filter(has_text=section).click()
            link.wait_for()
        return link

    def nav_pages(self) -> list[tuple[str, str]]:
        """(title, href) of every page the top navigation offers, in order: each section's menu
        opened in turn."""
        out = []
        sections = self.page.locator(NAV_SECTION)
        for i in range(sections.count()):
            sections.nth(i).click()
            links = self.page.locator(NAV_LINK)
            links.first.wait_for()
            out += [(text.strip().splitlines()[-1].strip(), links.nth(j).get_attribute("href") or "")
                    for j, text in enumerate(links.all_inner_texts())]
            self.page.keyboard.press("Escape")
            links.first.wait_for(state="detached")
        return out

    def goto(self, title: str) -> None:
        """Open a page through the top navigation (the session, and its text, stay)."""
        self.start_goto(title)()

    def start_goto(self, title: str):
        """Click the top navigation's link to `title`; returns the wait of `goto`, to call later."""
        link = self.nav_link(title)
        url = urllib.parse.urljoin(self.page.url, link.get_attribute("href"))
        settle = self.started(link.click)
        path = urllib.parse.urlsplit(url).path  # the query follows the view (links): match the page's path

        def arrived() -> None:
            settle()
            heading = self.page.locator("[data-testid=stMain] h1").first
            if urllib.parse.urlsplit(self.page.url).path == path and heading.count():
                return  # idle on the page already (a second wait for idle cost 0.45 s a switch, until stop 80)
            self.page.wait_for_url(lambda u: urllib.parse.urlsplit(u).path == path)
            heading.wait_for()
            self.wait_idle()
        return arrived

    def heading(self) -> str:
        return self.page.locator("[data-testid=stMain] h1").first.inner_text()

    def choose(self, label: str, option: str, scope: str = "") -> None:
        """Pick `option` (its shown text) in the selectbox labelled `label`, or type it into the
        number input of that label."""
        combo = self.page.locator(f"{scope} input[role=combobox][aria-label={_css_str(label)}]")
        number = self.page.locator(f"{scope} [data-testid=stNumberInput]").filter(
            has=self.page.get_by_text(label, exact=True)).locator("input")
        self.page.locator(f"{scope} input[role=combobox][aria-label={_css_str(label)}], "
                          f"{scope} [data-testid=stNumberInput] input").first.wait_for()
        is_combo = bool(combo.count())
        assert is_combo or number.count() == 1, f"no selectbox or number input labelled {label!r}"
        if (combo if is_combo else number).input_value() == option:  # there already: no rerun starts (`set_text`)
            self.wait_idle()
        elif is_combo:
            combo.click()
            combo.fill(option)
            self.rerun(self.page.get_by_role("option", name=option, exact=True).click)
        else:
            number.fill(option)
            self.rerun(lambda: number.press("Enter"))

    def radio(self, label: str, option: str) -> None:
        group = self.page.locator("[data-testid=stRadio]").filter(
            has=self.page.get_by_text(label, exact=True))
        self.rerun(group.get_by_text(option, exact=True).click)

    def click(self, locator) -> None:
        """Click a button (or toggle) and wait for the rerun it starts."""
        self.rerun(locator.click)

    def model_title(self) -> str:
        """What the sidebar's model picker shows."""
        picker = self.page.locator('[data-testid=stSidebar] input[role=combobox][aria-label="Model"]')
        return picker.input_value()

    def switch(self, label: str):
        """A st.toggle of the sidebar, by its label (is_checked() tells its state)."""
        return self.page.locator(f"[data-testid=stSidebar] input[role=switch][aria-label={_css_str(label)}]")

    def nav_titles(self) -> list[str]:
        """The pages the navigation offers, in order."""
        return [title for title, _ in self.nav_pages()]

    def choose_model(self, key: str) -> None:
        from mha_viz.ui.shell import sidebar

        self.choose("Model", sidebar.model_title(key), scope="[data-testid=stSidebar]")

    # -- reading -------------------------------------------------------------------------------
    def charts(self):
        return self.page.locator("[data-testid=stMain] [data-testid=stPlotlyChart]")

    def ticks(self, axis: str = "x", chart: int = 0) -> list[str]:
        """The tick labels a chart shows on one axis, in screen order (left to right, top to
        bottom), without the invisible suffix that tells repeated tokens apart."""
        labels = self.charts().nth(chart).evaluate(TICKS_PROBE, axis)
        return [text.split(ZW, 1)[0] for text, _ in sorted(labels, key=lambda item: item[1])]

    def point(self, chart, index: int, curve: int = 1) -> tuple[float, float]:
        """The screen position of point `index` of trace `curve` of `chart` (a locator from `charts()`): what
        a click on that marker clicks."""
        return tuple(chart.evaluate(CURVE_POINT, [index, curve]))

    def chart_title(self, chart: int = 0) -> str:
        """The chart's title read as one line (Plotly draws each line of a wrapped title as a tspan)."""
        title = self.charts().nth(chart).locator(".gtitle")
        return title.first.evaluate(TITLE_LINES) if title.count() else ""

    def titled(self, start: str):
        """The first chart whose title starts with `start` (a locator), or None."""
        for i in range(self.charts().count()):
            if self.chart_title(i).startswith(start):
                return self.charts().nth(i)
        return None

    def facts(self) -> dict[str, str]:
        """The Model facts page's table as {fact: value}."""
        rows = self.page.locator("[data-testid=stMain] [data-testid=stTable]").evaluate(
            "el => Array.from(el.querySelectorAll('tbody tr')).map("
            "tr => Array.from(tr.querySelectorAll('th, td')).map(c => c.innerText.trim()))")
        return {row[-2]: row[-1] for row in rows if len(row) >= 2}

    def alerts(self, kind: str) -> list[str]:
        """Texts of the st.error / st.warning / st.info boxes ('Error', 'Warning', 'Info')."""
        return self.page.locator(f"[data-testid=stAlertContent{kind}]").all_inner_texts()

    def exceptions(self) -> list[str]:
        return self.page.locator("[data-testid=stException]").all_inner_texts()

    def assert_clean(self, *, errors_expected: bool = False) -> None:
        """No exception box, no error alert (unless expected), no dialog, no JavaScript error."""
        assert not self.exceptions(), self.exceptions()
        if not errors_expected:
            assert not self.alerts("Error"), self.alerts("Error")
        assert not self.dialogs, f"a dialog fired: {self.dialogs}"
        assert not self.page_errors, f"JavaScript errors: {self.page_errors}"
        assert health(self.base_url) == "ok"

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.test_name}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def _css_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture(scope="session")
def _models(e2e_ready):
    """The bundled models, loaded in the test process in the background while the server and
    the browser start (the tests compare what the browser shows with what they compute)."""
    from concurrent.futures import ThreadPoolExecutor

    def load(key: str):
        import mha_viz

        return mha_viz.load_model(key, device="cpu")

    with ThreadPoolExecutor(max_workers=1) as pool:
        yield {key: pool.submit(load, key) for key in ("minilm", "smollm2")}


@pytest.fixture(scope="session")
def run_of(_models):
    """run_of(model key, text): the AttentionRun the app computes (same tokenizer and token cap),
    for the tokens the charts should show."""
    import mha_viz

    def run_of(key: str, text: str, max_tokens: int = 512):
        return mha_viz.analyze(_models[key].result(), text, max_tokens=max_tokens)

    return run_of
