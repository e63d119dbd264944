"""Load figure (a benchmark, not a test): N browser sessions working on one server at once.

Run: `.venv/bin/python benchmarks/load.py [--sessions 4 8 16] [--seconds 60] [--model minilm]`
(about 5 minutes with the defaults). Needs PyPI's `playwright` and a Chromium at /usr/bin/chromium
(or $MHA_VIZ_CHROMIUM); `playwright install` is never used.

It starts its own `streamlit run app.py` (own process group, always stopped at the end) and one
headless Chromium. For each N it opens N browser contexts (N Streamlit sessions) on the Model
view, gives each one warm-up analysis (not counted; the model itself is loaded by the first page
load), then for `--seconds` every session, all at the same time, types a new distinct sentence
into the sidebar's Sentence box, applies it (Ctrl+Enter) and waits until its analysis is done;
a session whose analysis is done starts its next one at once. The sessions run concurrently as
coroutines of playwright's async API (asyncio.gather).

"Analysis done" (checked inside the page every 100 ms): the rerun has been seen to start (the
status widget said Running/Stop or elements were marked stale, counted by a MutationObserver,
or the grid changed), the "Press Ctrl+Enter to apply" hint is hidden, the status widget shows no
Running/Stop, there is no skeleton and no stale element, three polls in a row, and the Model
view's grid image is not the one shown before the sentence was applied (a new figure was drawn
for the new text). Latency runs from the Ctrl+Enter to the first of those idle polls; it includes
the browser drawing the figure (the browser runs on the same machine as the server).

Errors: an analysis that ends with an exception or st.error box on the page, one that is not done
within 120 s (the page is then reloaded), a JavaScript page error, a dialog, and a health check
of the server (every 2 s) that does not answer "ok". Memory: the resident size (VmRSS) of the
server's process group, sampled every 0.2 s; the peak during each N's timed window.
Throughput: the analyses started within the window, over the time until the last of them ended.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from app_server import free_port, health, start_server, stop_server  # noqa: E402 - beside this script

CHROMIUM = os.environ.get("MHA_VIZ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]
BOOT_TIMEOUT_S = 240  # the server preloads (libraries, default model) before it answers
OPEN_TIMEOUT_S = 240  # a first page load: may include loading the model
ANALYSIS_TIMEOUT_S = 120
SAME_IMAGE_GRACE_POLLS = 30  # idle this long (3 s) with an unchanged grid: done, but flagged
WORDS = ["rivers", "engines", "violins", "glaciers", "lanterns", "tigers", "comets", "orchards",
         "harbors", "pianos", "deserts", "falcons", "bridges", "meadows", "rockets", "islands"]
MODEL_QUERY = {"minilm": "all-MiniLM", "smollm2": "SmolLM2"}  # typed into the model picker

# Counts the moments the page turns busy (status widget Running/Stop, or stale elements), however
# briefly, and reads the page's state (as in tests/e2e/conftest.py's BUSY_OBSERVER / wait_idle).
INIT_JS = """
(() => {
  window.__busySeen = 0;
  let busy = false;
  const check = (records) => {
    const status = document.querySelector('[data-testid=stStatusWidget]');
    let now = !!(status && /Running|Stop/.test(status.innerText))
              || !!document.querySelector('[data-stale=true]');
    for (const r of records) {
      if (r.attributeName === 'data-stale' && r.oldValue === 'true') now = true;
    }
    if (now && !busy) window.__busySeen++;
    busy = now;
  };
  const start = () => new MutationObserver(check).observe(document, {
    subtree: true, childList: true, characterData: true, attributes: true,
    attributeOldValue: true, attributeFilter: ['data-stale']});
  start();
  window.__gridHash = () => {
    const img = document.querySelector('[data-testid=stMain] [data-testid=stPlotlyChart] image');
    const s = img ? (img.getAttribute('href') || img.getAttribute('xlink:href') || '') : '';
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return s.length + ':' + (h >>> 0);
  };
  window.__state = () => {
    const status = Array.from(document.querySelectorAll('[data-testid=stStatusWidget]'))
      .map(e => e.innerText).join(' ');
    const hint = document.querySelector('[data-testid=stSidebar] [data-testid=InputInstructions]');
    return {
      seen: window.__busySeen,
      busy: /Running|Stop/.test(status),
      hint: !!(hint && hint.offsetParent !== null && hint.innerText.trim()),
      skeletons: document.querySelectorAll('[data-testid=stSkeleton]').length,
      stale: document.querySelectorAll('[data-stale=true]').length,
      main: !!document.querySelector('[data-testid=stMain]'),
      hash: window.__gridHash(),
      exceptions: document.querySelectorAll('[data-testid=stException]').length,
      errors: document.querySelectorAll('[data-testid=stAlertContentError]').length,
      status: status,
    };
  };
})();
"""

# Resolves once the analysis started after (seenBefore, hashBefore) is done; see the module doc.
WAIT_JS = """
async ([seenBefore, hashBefore, timeoutMs, graceTicks]) => {
  const t0 = performance.now();
  let quiet = 0, firstQuiet = 0, s = null;
  while (true) {
    s = window.__state();
    const started = s.seen > seenBefore || s.hash !== hashBefore;
    const idle = started && !s.hint && !s.busy && !s.skeletons && !s.stale && s.main;
    const drawn = s.hash !== hashBefore || s.exceptions > 0 || s.errors > 0;
    if (idle) { if (quiet === 0) firstQuiet = performance.now(); quiet++; } else quiet = 0;
    if (idle && quiet >= 3 && drawn)
      return {ok: true, same: false, sinceIdle: (performance.now() - firstQuiet) / 1000, state: s};
    if (idle && quiet >= graceTicks)
      return {ok: true, same: true, sinceIdle: (performance.now() - firstQuiet) / 1000, state: s};
    if (performance.now() - t0 > timeoutMs)
      return {ok: false, same: false, sinceIdle: 0, state: s};
    await new Promise(r => setTimeout(r, 100));
  }
}
"""




def group_rss(pgid: int) -> int:
    """Bytes resident in the processes of process group `pgid` (the server and its children)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            if int(stat[stat.rindex(")") + 2:].split()[2]) != pgid:
                continue
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            continue
    return total


class Monitor:
    """Samples the server's memory every 0.2 s and its health every 2 s, in background threads."""

    def __init__(self, pgid: int, base_url: str):
        self.pgid, self.base_url = pgid, base_url
        self.peak = 0
        self.health_failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._memory, daemon=True),
                         threading.Thread(target=self._health, daemon=True)]
        for t in self._threads:
            t.start()

    def reset(self) -> None:
        self.peak = group_rss(self.pgid)
        self.health_failures = []

    def _memory(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, group_rss(self.pgid))
            self._stop.wait(0.2)

    def _health(self) -> None:
        while not self._stop.is_set():
            answer = health(self.base_url)
            if answer != "ok":
                self.health_failures.append(answer)
            self._stop.wait(2)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=15)


# -- sessions -------------------------------------------------------------------------------------
class Session:
    def __init__(self, index: int, page, base_url: str):
        self.index, self.page, self.base_url = index, page, base_url
        self.events: list[str] = []  # JavaScript errors and dialogs since the last look
        page.on("pageerror", lambda exc: self.events.append(f"pageerror: {exc}"))
        page.on("dialog", self._on_dialog)

    def _on_dialog(self, dialog) -> None:
        self.events.append(f"dialog: {dialog.type}: {dialog.message}")
        asyncio.ensure_future(dialog.dismiss())

    @property
    def box(self):
        return self.page.locator("[data-testid=stSidebar] [data-testid=stTextArea] textarea")

    async def wait_idle(self, timeout_s: float) -> None:
        """Until idle (no Running/Stop, skeleton or stale element), three polls in a row."""
        quiet, deadline = 0, time.monotonic() + timeout_s
        while quiet < 3:
            s = await self.page.evaluate("window.__state()")
            quiet = 0 if (s["busy"] or s["hint"] or s["skeletons"] or s["stale"] or not s["main"]) else quiet + 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"session {self.index} not idle within {timeout_s} s ({s['status']!r})")
            await asyncio.sleep(0.15)

    async def open(self, model: str) -> None:
        await self.page.goto(self.base_url + "/", wait_until="domcontentloaded")
        await self.page.locator("[data-testid=stMain] [data-testid=stPlotlyChart]").first.wait_for(
            timeout=OPEN_TIMEOUT_S * 1000)
        await self.wait_idle(OPEN_TIMEOUT_S)
        if model != "minilm":
            picker = self.page.locator('[data-testid=stSidebar] input[role=combobox][aria-label="Model"]')
            before = await self.page.evaluate("[window.__busySeen, window.__gridHash()]")
            await picker.click()
            await picker.fill(MODEL_QUERY[model])
            await self.page.get_by_role("option").first.click()
            result = await self.page.evaluate(WAIT_JS, [*before, OPEN_TIMEOUT_S * 1000, SAME_IMAGE_GRACE_POLLS])
            if not result["ok"] or MODEL_QUERY[model] not in await picker.input_value():
                raise RuntimeError(f"session {self.index}: could not switch to {model}")

    async def analyze(self, text: str) -> tuple[str, float, bool]:
        """Apply `text`; (outcome, latency in s, grid unchanged). outcome: 'ok', 'alert', 'timeout'."""
        seen, grid = await self.page.evaluate("[window.__busySeen, window.__gridHash()]")
        await self.box.fill(text)
        t0 = time.perf_counter()
        await self.box.press("Control+Enter")
        result = await self.page.evaluate(WAIT_JS, [seen, grid, ANALYSIS_TIMEOUT_S * 1000,
                                                    SAME_IMAGE_GRACE_POLLS])
        latency = time.perf_counter() - t0 - result["sinceIdle"]
        if not result["ok"]:
            return "timeout", latency, False
        s = result["state"]
        if s["exceptions"] or s["errors"]:
            return "alert", latency, result["same"]
        return "ok", latency, result["same"]


def sentence(n: int, i: int, k: int) -> str:
    return (f"Session {i} request {k} of run {n} about {WORDS[(i + k) % len(WORDS)]} "
            f"and {WORDS[(3 * i + 5 * k + n) % len(WORDS)]}.")


async def run_level(browser, base_url: str, n: int, seconds: float, model: str, monitor: Monitor) -> dict:
    contexts = [await browser.new_context(viewport={"width": 1280, "height": 800}) for _ in range(n)]
    sessions = []
    for i, ctx in enumerate(contexts):
        ctx.set_default_timeout(60_000)
        await ctx.add_init_script(INIT_JS)
        sessions.append(Session(i, await ctx.new_page(), base_url))
    errors: dict[str, int] = {"alert": 0, "timeout": 0, "pageerror": 0, "dialog": 0, "health": 0, "other": 0}
    notes: list[str] = []
    latencies: list[float] = []
    same_image = 0
    try:
        await asyncio.gather(*(s.open(model) for s in sessions))
        # warm-up: one analysis per session, all at once, not counted
        warm = await asyncio.gather(*(s.analyze(f"Warm-up {s.index} of run {n}: the quiet harbor at dawn.")
                                      for s in sessions))
        for s, (outcome, _, _) in zip(sessions, warm):
            if outcome != "ok":
                notes.append(f"warm-up of session {s.index}: {outcome}")
            s.events.clear()
        monitor.reset()
        start = time.perf_counter()
        deadline = start + seconds
        last_end = start

        async def loop(s: Session) -> None:
            nonlocal same_image, last_end
            k = 0
            while time.perf_counter() < deadline:
                try:
                    outcome, latency, same = await s.analyze(sentence(n, s.index, k))
                except Exception as exc:  # noqa: BLE001 - a crashed page, a closed target: an error
                    outcome, latency, same = "other", 0.0, False
                    notes.append(f"session {s.index}: {type(exc).__name__}: {str(exc)[:160]}")
                k += 1
                last_end = max(last_end, time.perf_counter())
                for event in s.events:
                    errors[event.split(":", 1)[0]] += 1
                    notes.append(f"session {s.index}: {event[:200]}")
                s.events.clear()
                if outcome == "ok":
                    latencies.append(latency)
                    same_image += same
                    continue
                errors[outcome] += 1
                if outcome in ("timeout", "other"):
                    try:  # start again from a fresh page load of the same session
                        await s.page.reload(wait_until="domcontentloaded")
                        await s.wait_idle(ANALYSIS_TIMEOUT_S)
                    except Exception as exc:  # noqa: BLE001
                        notes.append(f"session {s.index}: reload failed: {exc}")
                        return

        await asyncio.gather(*(loop(s) for s in sessions))
        wall = last_end - start
        peak = monitor.peak
        errors["health"] = len(monitor.health_failures)
        notes += [f"health: {h}" for h in monitor.health_failures[:5]]
    finally:
        for ctx in contexts:
            try:
                await ctx.close()
            except Exception:  # noqa: BLE001
                pass
    latencies.sort()
    q = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) >= 2 else latencies * 99
    return {"n": n, "analyses": len(latencies), "wall": wall, "p50": q[49] if q else float("nan"),
            "p95": q[94] if q else float("nan"), "errors": errors, "peak": peak, "same": same_image,
            "notes": notes}


def torch_threads() -> str:
    try:
        out = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        return out.stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


async def main_async(args, base_url: str, monitor: Monitor) -> list[dict]:
    from playwright.async_api import async_playwright

    results = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for n in args.sessions:
                print(f"  {n} sessions: opening, warm-up, then {args.seconds:g} s of analyses…", flush=True)
                r = await run_level(browser, base_url, n, args.seconds, args.model, monitor)
                total = sum(r["errors"].values())
                print(f"    {r['analyses']} analyses in {r['wall']:.1f} s, p50 {r['p50']:.2f} s, "
                      f"p95 {r['p95']:.2f} s, {total} errors, peak RSS {r['peak'] / 2**20:.0f} MiB", flush=True)
                results.append(r)
        finally:
            await browser.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[4, 8, 16], metavar="N",
                        help="concurrent browser sessions, one measurement per value (default: 4 8 16)")
    parser.add_argument("--seconds", type=float, default=60, help="timed window per N (default 60)")
    parser.add_argument("--model", choices=sorted(MODEL_QUERY), default="minilm", help="default minilm")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "mha-viz-load-server.log",
                        help="the server's log (default: mha-viz-load-server.log in the temporary folder)")
    args = parser.parse_args()
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        sys.exit(f"no Chromium at {CHROMIUM} (set MHA_VIZ_CHROMIUM)")

    began = datetime.datetime.now().astimezone()
    threads = torch_threads()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    print(f"mha-viz load benchmark, {began:%Y-%m-%d %H:%M %Z}: server {base_url}, log {args.log}", flush=True)
    proc = start_server(port, args.log)
    monitor = None
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while health(base_url, timeout=5) != "ok":
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(args.log.read_text(errors="replace").splitlines()[-30:])
                sys.exit(f"the server did not start (exit {proc.poll()}):\n{tail}")
            time.sleep(0.25)
        monitor = Monitor(proc.pid, base_url)
        idle_rss = group_rss(proc.pid)
        results = asyncio.run(main_async(args, base_url, monitor))
    finally:
        if monitor is not None:
            monitor.stop()
        stop_server(proc)

    print()
    print(f"Machine: {os.cpu_count()} CPUs, torch threads {threads} (server, default); model {args.model}, "
          f"Model view page; headless Chromium on the same machine; {args.seconds:g} s per row; "
          f"started {began:%Y-%m-%d %H:%M %Z}.")
    print("Warm-up: one analysis per session before timing (not counted); the model is loaded by the "
          f"first page load. Server RSS before any page: {idle_rss / 2**20:.0f} MiB.")
    print()
    print("| sessions | analyses | analyses/s | p50 latency s | p95 latency s | errors | server peak RSS |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        total = sum(r["errors"].values())
        detail = ", ".join(f"{v} {k}" for k, v in r["errors"].items() if v)
        rate = r["analyses"] / r["wall"] if r["wall"] > 0 else 0.0
        print(f"| {r['n']} | {r['analyses']} | {rate:.2f} | {r['p50']:.2f} | {r['p95']:.2f} | "
              f"{total}{f' ({detail})' if detail else ''} | {r['peak'] / 2**20:.0f} MiB |")
    for r in results:
        if r["same"]:
            print(f"Note ({r['n']} sessions): {r['same']} analyses ended with the grid image unchanged "
                  "(counted as done after 3 s idle).")
        for note in r["notes"][:10]:
            print(f"Note ({r['n']} sessions): {note}")


if __name__ == "__main__":
    main()
