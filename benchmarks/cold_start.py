"""Cold start (issue 20): from a new server answering its health check to the first Model view.

Run: `.venv/bin/python benchmarks/cold_start.py [--repeat 3] [--compare /path/to/other/checkout]`
(about 20 s a round on 2 idle CPU cores). Needs PyPI's `playwright` and a Chromium at
/usr/bin/chromium (or $MHA_VIZ_CHROMIUM); `playwright install` is never used.

Each round starts `streamlit run app.py` the way the end-to-end tests do
(tests/e2e/conftest.py `start_server`: own process group, loopback, a free port, no file
watcher), polls `/_stcore/health` every 50 ms, and, the moment it answers `ok`, opens the
default page (the Model view, MiniLM, the default sentence) in a new context of a headless
Chromium started beforehand. It reports, per round:

- boot: from starting the server process to its health check answering `ok`;
- chart: from that answer to the first `[data-testid=stPlotlyChart]` drawn;
- idle: from that answer to the page idle (no *Running* status, nothing stale), chart drawn.

With `--compare DIR` each round also starts DIR's app.py (another checkout, e.g. the code before
a change, `git worktree add ../orig HEAD`), alternating which goes first, so that both see the
same load on a shared machine; the medians and their ratios come last. Nothing else may run in
the servers meanwhile: the one browser tab is the only session.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from app_server import free_port, health, start_server, stop_server  # noqa: E402 - beside this script
from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

from tests.e2e.conftest import CHROMIUM, CHROMIUM_PLAIN_ARGS  # noqa: E402 - the e2e tests' browser

TARGET_S = 5.0  # health OK -> first Model view
TIMEOUT_S = 240
CHART = "[data-testid=stMain] [data-testid=stPlotlyChart]"
IDLE = """() => {
  const status = Array.from(document.querySelectorAll('[data-testid=stStatusWidget]'))
      .map(e => e.innerText).join(' ');
  return !/Running|Stop/.test(status)
         && !document.querySelector('[data-stale=true], [data-testid=stSkeleton]')
         && !!document.querySelector('[data-testid=stMain] [data-testid=stPlotlyChart]');
}"""


def cold_start(browser, root: Path, log_path: Path) -> dict[str, float]:
    """One cold start of `root`'s app.py: {"boot", "chart", "idle"} in seconds (see the module doc)."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    start = time.perf_counter()
    proc = start_server(port, log_path, root)
    context = None
    try:
        while health(base_url) != "ok":
            if proc.poll() is not None or time.perf_counter() - start > TIMEOUT_S:
                raise RuntimeError(f"the server did not answer its health check; see {log_path}")
            time.sleep(0.05)
        healthy = time.perf_counter()
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(base_url + "/", wait_until="commit")
        page.locator(CHART).first.wait_for(timeout=TIMEOUT_S * 1000)
        chart = time.perf_counter()
        page.wait_for_function(IDLE, timeout=TIMEOUT_S * 1000, polling=50)
        idle = time.perf_counter()
        return {"boot": healthy - start, "chart": chart - healthy, "idle": idle - healthy}
    finally:
        if context is not None:
            context.close()
        stop_server(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="another checkout whose app.py runs beside this one")
    args = parser.parse_args()
    apps = {"this": ROOT} | ({"compare": args.compare.resolve()} if args.compare else {})
    logs = Path(tempfile.mkdtemp(prefix="mha-viz-cold-"))
    results: dict[str, list[dict[str, float]]] = {name: [] for name in apps}
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_PLAIN_ARGS)
        try:
            for i in range(args.repeat):
                order = list(apps) if i % 2 == 0 else list(reversed(apps))
                for name in order:
                    r = cold_start(browser, apps[name], logs / f"{name}-{i}.log")
                    results[name].append(r)
                    print(f"round {i + 1} {name:8s} ({apps[name]}): boot {r['boot']:5.1f} s, "
                          f"chart {r['chart']:5.1f} s, idle {r['idle']:5.1f} s after health OK", flush=True)
        finally:
            browser.close()
    medians = {name: {k: statistics.median(r[k] for r in runs) for k in ("boot", "chart", "idle")}
               for name, runs in results.items()}
    print(f"\nmedians of {args.repeat} (server logs in {logs}):")
    for name, m in medians.items():
        print(f"  {name:8s} boot {m['boot']:5.1f} s, chart {m['chart']:5.1f} s, idle {m['idle']:5.1f} s")
    if args.compare:
        this, other = medians["this"], medians["compare"]
        ratios = ", ".join(f"{k} {other[k] / this[k]:.2f}×" for k in ("boot", "chart", "idle"))
        print(f"  compare/this: {ratios}")
        print(f"  boot + chart: this {this['boot'] + this['chart']:.1f} s, "
              f"compare {other['boot'] + other['chart']:.1f} s")
    m = medians["this"]
    print_verdicts([(f"health OK -> first Model view <= {TARGET_S:.0f} s (median)", f"{m['chart']:.1f} s",
                     m["chart"] <= TARGET_S),
                    (f"health OK -> Model view idle <= {TARGET_S:.0f} s (median)", f"{m['idle']:.1f} s",
                     m["idle"] <= TARGET_S)],
                   where=f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
