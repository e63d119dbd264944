"""A click's timeline for benchmarks/pages.py (issue 59): the click, each run of the app's script
(from the run trace, mha_viz.ui.shell.run_trace, that the server writes when MHA_VIZ_RUN_TRACE names a
file), each websocket message (bytes, arrival at the browser's network layer) and each chart's
drawing (Plotly's `plotly_afterplot`). A click's time runs from the click to the later of the page
going idle and its last chart drawn.

Every time is on one clock, seconds since the epoch: the page's performance.timeOrigin + now(),
the server's time.time() and this script's (the browser and both servers share the machine).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from mha_viz.ui.shell import run_trace
from tests.e2e.conftest import BUSY_OBSERVER, App

PAGE_TIMEOUT_S = 180  # one click
POLL_MS = 20
DRAWN_QUIET_MS = 1000  # after idle, how long no chart may draw before the click counts as done (an image
# trace draws once its PNG is decoded: seconds late on a busy machine)

# The e2e tests' busy counter; the last trusted click; each websocket message the page receives; each
# chart's `plotly_afterplot` (plotly.js sets `gd.emit` on each chart's div when it first draws it: a
# setter on the prototype wraps it).
INIT_JS = BUSY_OBSERVER + """
(() => {
  const now = () => performance.timeOrigin + performance.now();
  window.__clickAt = 0;
  document.addEventListener('click', (e) => { if (e.isTrusted) window.__clickAt = now(); }, true);
  window.__frames = [];
  const size = (d) => typeof d === 'string' ? d.length : (d.byteLength !== undefined ? d.byteLength : (d.size || 0));
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => window.__frames.push([now(), size(e.data)]));
    }
  };
  window.__plots = [];
  let charts = 0;
  Object.defineProperty(HTMLElement.prototype, 'emit', {configurable: true, get() { return undefined; }, set(fn) {
    const el = this;
    if (el.__chart === undefined) el.__chart = charts++;
    Object.defineProperty(el, 'emit', {configurable: true, writable: true, enumerable: true, value: function (ev) {
      if (ev === 'plotly_afterplot') window.__plots.push([now(), el.__chart]);
      return fn.apply(this, arguments);
    }});
  }});
})();
"""

# Resolves once the click's runs are done and its charts drawn (times: epoch ms).
WAIT_JS = """
async ([seenBefore, titleBefore, path, timeoutMs, pollMs, quietMs]) => {
  const now = () => performance.timeOrigin + performance.now();
  const clickAt = window.__clickAt;
  const h1 = () => { const e = document.querySelector('[data-testid=stMain] h1'); return e ? e.innerText : ''; };
  let quiet = 0, idleAt = 0, state = '';
  while (true) {
    const status = Array.from(document.querySelectorAll('[data-testid=stStatusWidget]'))
      .map(e => e.innerText).join(' ');
    const busy = /Running|Stop/.test(status);
    const skeletons = document.querySelectorAll('[data-testid=stSkeleton]').length;
    const stale = document.querySelectorAll('[data-stale=true]').length;
    const onPage = !path || location.pathname.replace(/\\/+$/, '') === path;
    const title = !!document.querySelector('[data-testid=stMain] h1');
    // a click so quick that no busy state was ever drawn: the server answered, the title is the page's
    const answered = window.__frames.some(([t]) => t >= clickAt);
    const started = window.__e2eBusySeen > seenBefore || (answered && h1() !== '' && h1() !== titleBefore);
    const idle = started && !busy && !skeletons && !stale && onPage && title;
    state = `started=${started} status='${status}' skeletons=${skeletons} stale=${stale} path=${location.pathname}`;
    if (idle) { if (quiet === 0) idleAt = now(); quiet++; } else quiet = 0;
    if (quiet >= 3) {
      const plots = window.__plots.filter(([t]) => t >= clickAt);
      const lastPlot = plots.length ? plots[plots.length - 1][0] : 0;
      if (now() - Math.max(idleAt, lastPlot) >= quietMs) break;
    }
    if (now() - clickAt > timeoutMs) return {ok: false, state};
    await new Promise(r => setTimeout(r, pollMs));
  }
  return {ok: true, clickAt, idleAt, reruns: window.__e2eBusySeen - seenBefore,
          plots: window.__plots.filter(([t]) => t >= clickAt), state};
}
"""

# What each chart of the main area holds (for the bare twin): its row on the page, its size, its traces, and its
# path shapes (the Line view's lines: how many shapes, how many segments in all).
CHARTS_JS = """
() => {
  // plotly.py sends numpy arrays as typed-array specs {dtype, bdata, shape: "r, c"}; lists as arrays
  const size = {f8: 8, f4: 4, i4: 4, u4: 4, i2: 2, u2: 2, i1: 1, u1: 1, u1c: 1};
  const dims = (a) => {
    if (!a) return null;
    if (a.bdata !== undefined) {
      if (a.shape) return String(a.shape).split(',').map(Number);
      return [Math.round(atob(a.bdata).length / (size[a.dtype] || 8))];
    }
    if (a.length === undefined) return null;
    return a[0] && typeof a[0] !== 'string' && a[0].length !== undefined ? [a.length, a[0].length] : [a.length];
  };
  return Array.from(document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')).map(gd => {
    const r = gd.getBoundingClientRect();
    const paths = ((gd.layout || {}).shapes || []).filter(s => s.type === 'path' && s.path);
    return {top: Math.round(r.top + window.scrollY), width: Math.round(r.width), height: Math.round(r.height),
            shapes: paths.length, segments: paths.reduce((n, s) => n + (s.path.match(/M/g) || []).length, 0),
            traces: (gd.data || []).map((t, k) => {
              const cd = gd.calcdata && gd.calcdata[k] && gd.calcdata[k][0];  // an image's pixels: w × h
              return {type: t.type || 'scatter', mode: t.mode || '', z: dims(t.z),
                      n: (dims(t.x) || dims(t.y) || [0])[0], source: t.source ? t.source.length : 0,
                      w: cd && cd.w ? cd.w : 0, h: cd && cd.h ? cd.h : 0};
            })};
  });
}
"""

# The tables of the main area: st.dataframe and st.data_editor (a Glide grid on a canvas, whose accessible twin is a
# table with role=grid) and st.table (a static HTML table, `static`): their row on the page, their size, and their
# rows and columns (the header row counted).
TABLES_JS = """
() => Array.from(document.querySelectorAll(
    '[data-testid=stMain] [data-testid=stDataFrame], [data-testid=stMain] [data-testid=stTable]')).map(el => {
  const r = el.getBoundingClientRect(), grid = el.querySelector('table[role=grid]');
  const body = el.querySelector('table:not([role=grid])'), row = body && body.querySelector('tr');
  const size = grid ? [Number(grid.getAttribute('aria-rowcount')) || 1, Number(grid.getAttribute('aria-colcount')) || 1]
                    : [body ? body.querySelectorAll('tr').length : 1, row ? row.children.length : 1];
  return {top: Math.round(r.top + window.scrollY), width: Math.round(r.width), height: Math.round(r.height),
          table: size, static: el.dataset.testid === 'stTable'};
})
"""


def new_app(browser, base_url: str, name: str) -> App:
    """A fresh session (browser context) with the timeline's recorders."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    context.add_init_script(INIT_JS)
    ui = App(context.new_page(), base_url, name)
    ui.frames = []  # (epoch s, bytes) of every websocket message, as the network layer reports it
    ui.page.on("websocket", lambda ws: ws.on(
        "framereceived", lambda payload: ui.frames.append((time.time(), len(payload)))))
    return ui


def timed(ui: App, action, *, path: str = "", title_before: str = "", trace: Path | None = None,
          what: str = "click") -> dict:
    """Do `action` (a click), wait until the page is idle and its charts drawn; the click's timeline."""
    seen = ui.reruns_seen()
    action()
    result = ui.page.evaluate(WAIT_JS, [seen, title_before, path, PAGE_TIMEOUT_S * 1000, POLL_MS, DRAWN_QUIET_MS])
    if not result["ok"]:
        raise RuntimeError(f"{what}: not done within {PAGE_TIMEOUT_S} s ({result['state']})")
    click, idle = result["clickAt"] / 1000, result["idleAt"] / 1000
    plots = [(t / 1000 - click, int(chart)) for t, chart in result["plots"]]
    done = max([idle] + [click + t for t, _ in plots])
    msgs = [(t - click, n) for t, n in ui.frames if click <= t <= done]
    runs = [{**r, "start": r["start"] - click, "end": r["end"] - click} for r in run_trace.read_trace(trace)
            if click - 0.05 <= r["start"] <= done] if trace else []
    return {"s": done - click, "idle": idle - click, "plots": plots, "msgs": msgs, "runs": runs,
            "bytes": sum(n for _, n in msgs), "busy": result["reruns"], "charts": ui.page.evaluate(CHARTS_JS),
            "tables": ui.page.evaluate(TABLES_JS),
            "problems": ui.exceptions() + ui.alerts("Error")}


def last_msg(r: dict) -> float:
    return r["msgs"][-1][0] if r["msgs"] else 0.0


def line(r: dict) -> str:
    """A click's timeline in one line: runs, messages, charts drawn, done (s after the click)."""
    runs = " ".join(f"{x['start']:.2f}–{x['end']:.2f}" + ("" if x["how"] == "done" else f"({x['how'][:6]})")
                    for x in r["runs"]) or "none seen"
    drawn = sorted({chart: t for t, chart in r["plots"]}.values())
    draws = (f"{len(drawn)} chart{'s' if len(drawn) != 1 else ''} drawn at " + " ".join(f"{t:.2f}" for t in drawn)
             if drawn else "no chart")
    return (f"run {runs} · {len(r['msgs'])} msgs {r['bytes'] / 1024:,.0f} KiB, last {last_msg(r):.2f} · {draws} · "
            f"idle {r['idle']:.2f} · done {r.get('own', r['s']):.2f} s")


def twin_spec(title: str, section: str, r: dict) -> dict:
    """What the bare twin of a page draws: its charts and tables, as the timeline `r` saw them."""
    return {"title": title, "section": section, "charts": r["charts"], "tables": r.get("tables", [])}


def write_spec(path: Path, pages: list[dict]) -> None:
    path.write_text(json.dumps({"pages": pages}), encoding="utf-8")
