"""Where a page's server time goes (a companion of benchmarks/pages.py): each page's second visit
run under cProfile in Streamlit's AppTest (the app in this process, no browser), with the
inputs of pages.py's setups.

Run: `.venv/bin/python benchmarks/pages_profile.py [--setups minilm,smollm2] [--pages head_view,qk]
[--top 8]`.

For each setup (minilm with Token limit 512, smollm2 with 256, the same long text as pages.py)
it applies the model, limit and text on Model facts, then per page: opens it (first visit), goes
to Model facts, and opens it again (second visit) twice: once plain (the wall time of the
AppTest run: the server's Python for the switch, with AppTest's own overhead) and once under
cProfile. Printed per page: the plain wall time, the profiled time split into the page's view
(`PageSpec.view`), the sidebar (`sidebar.draw`), `st.plotly_chart` (Streamlit turning the
figures into JSON: `plotly.io.to_json` and its validation), the figure building (the view minus
its st.plotly_chart calls, minus other Streamlit elements), the JSON size of every chart (the
bulk of the websocket payload), and the top functions of mha_viz by cumulative time, then the
top functions overall by their own time.

cProfile slows Python-heavy code by about 1.5-2 ×: read its numbers as shares, the plain time
as the size.
"""

from __future__ import annotations

import argparse
import os
import pstats
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pages import SETUPS, long_text  # noqa: E402 - benchmarks/pages.py, beside this script

from tests.app.helpers import AppTest  # noqa: E402 - the app tier's harness (only ui code imports streamlit)

# app.py, run under a profiler the harness switches on (cProfile follows only its own thread:
# AppTest runs the script in another one)
WRAPPER = f"""
import cProfile, sys
sys.path.insert(0, {str(ROOT)!r})
_prof = cProfile.Profile() if getattr(sys, "_mha_profile_on", False) else None
if _prof is not None:
    _prof.enable()
try:
    with open({str(ROOT / 'app.py')!r}) as _f:
        exec(compile(_f.read(), {str(ROOT / 'app.py')!r}, "exec"))
finally:
    if _prof is not None:
        _prof.disable()
        sys._mha_profiles.append(_prof)
"""


def run_page(at: AppTest, page_id: str) -> float:
    from mha_viz.ui.kit import keys

    at.session_state[keys.GOTO] = page_id
    start = time.perf_counter()
    at.run()
    wall = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"{page_id}: {at.exception}")
    return wall


def chart_bytes(at: AppTest) -> tuple[int, int]:
    """(charts, bytes of their JSON specs) on the page just drawn."""
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    return len(specs), sum(len(s.encode()) for s in specs)


def cum(stats: pstats.Stats, file_part: str, name: str) -> float:
    """Cumulative seconds of the function `name` in a file whose path contains `file_part`
    (recursive calls counted once)."""
    total = 0.0
    for (file, _, func), (_, _, _, ct, _) in stats.stats.items():
        if func == name and file_part in file:
            total += ct
    return total


def ours(file: str) -> bool:
    return f"{os.sep}mha_viz{os.sep}" in file and f"{os.sep}.venv{os.sep}" not in file


def short(file: str, line: int, func: str) -> str:
    if ours(file):
        file = "mha_viz/" + file.split(f"{os.sep}mha_viz{os.sep}", 1)[1]
    elif "site-packages" in file:
        file = file.split("site-packages" + os.sep, 1)[1]
    return f"{file}:{line}({func})"


def report(page_id: str, view: str, wall: float, profile_wall: float, stats: pstats.Stats, charts: tuple[int, int],
           top: int) -> None:
    view_s = cum(stats, "mha_viz", view)
    sidebar = cum(stats, "mha_viz/ui/shell/sidebar.py", "draw")
    plotly_chart = cum(stats, "streamlit/elements/plotly_chart.py", "plotly_chart")
    to_json = cum(stats, "plotly/io/_json.py", "to_json")
    print(f"\n## {page_id}: second visit {wall:.2f} s plain (AppTest run); profiled {profile_wall:.2f} s: "
          f"view {view_s:.2f} s, sidebar {sidebar:.2f} s, st.plotly_chart {plotly_chart:.2f} s "
          f"(plotly.io.to_json {to_json:.2f} s), view minus st.plotly_chart {view_s - plotly_chart:.2f} s; "
          f"{charts[0]} charts, {charts[1] / 1024:,.0f} KiB of chart JSON")
    rows = [(ct, short(f, line, fn), nc) for (f, line, fn), (_, nc, _, ct, _) in stats.stats.items() if ours(f)]
    rows.sort(reverse=True)
    print("  mha_viz by cumulative time:")
    for ct, name, nc in rows[:top]:
        print(f"    {ct:6.2f} s  {nc:6d} calls  {name}")
    own = [(tt, short(f, line, fn), nc) for (f, line, fn), (_, nc, tt, _, _) in stats.stats.items()]
    own.sort(reverse=True)
    print("  everything by own time:")
    for tt, name, nc in own[:top]:
        print(f"    {tt:6.2f} s  {nc:6d} calls  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", default="minilm,smollm2")
    parser.add_argument("--pages", default="", help="comma-separated page ids (default: every page)")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--dump", type=Path, help="a folder for the .prof files (snakeviz, pstats)")
    args = parser.parse_args()
    from mha_viz.ui.kit import keys
    from mha_viz.ui.shell import navigation as pages

    wanted = [p for p in args.pages.split(",") if p] or [p.id for p in pages.PAGES]
    sys._mha_profiles = []
    for key in [s for s in args.setups.split(",") if s]:
        model, tokens, text = SETUPS[key]  # pages.py's setup: its model, Token limit and text (None: the long one)
        print(f"\n# {key}: {model}, Token limit {tokens}", flush=True)
        sys._mha_profile_on = False
        at = AppTest.from_string(WRAPPER, default_timeout=600)
        at.run()
        if model != "minilm":
            at.selectbox(key=keys.MODEL_CHOICE).set_value(model).run()
        run_page(at, "model_facts")
        at.number_input(key=keys.TOKEN_LIMIT).set_value(tokens).run()
        at.text_area(key=keys.TEXT).input(text or long_text()).run()
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
        cur = at.session_state[keys.CURRENT]
        print(f"{cur.run.n} tokens, {cur.run.num_layers} layers × {cur.run.num_heads} heads")
        for page_id in wanted:
            spec = pages.BY_ID[page_id]
            first = run_page(at, page_id)
            run_page(at, "model_facts")
            wall = run_page(at, page_id)
            charts = chart_bytes(at)
            run_page(at, "model_facts")
            sys._mha_profiles.clear()
            sys._mha_profile_on = True
            try:
                profile_wall = run_page(at, page_id)
            finally:
                sys._mha_profile_on = False
            stats = pstats.Stats(sys._mha_profiles[0])
            for prof in sys._mha_profiles[1:]:
                stats.add(prof)
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
                stats.dump_stats(args.dump / f"{key}-{page_id}.prof")
            print(f"\n(first visit {first:.2f} s plain)", end="")
            report(page_id, spec.view.__name__, wall, profile_wall, stats, charts, args.top)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
