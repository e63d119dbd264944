"""Where a run should stop holding every head (a benchmark, not a test): each page's server time at
pages.py's setups (MiniLM at 512 tokens, SmolLM2 at 256) with the analysis dense against the same
analysis long (`MHA_VIZ_DENSE_MB`: every head's array held, or each layer's rows recomputed as a page
draws them), side by side in one run.

Run: `.venv/bin/python benchmarks/dense_threshold.py [--setups minilm,smollm2] [--pages head_view,focus]
[--long-mb 64] [--rounds 2]` (about 5 minutes on 2 CPU cores).

Each setting runs in its own process (the server-wide cache keeps one run per text, whichever the setting),
in turn, `--rounds` times alternating, so that a busy machine weighs on both alike. Per setup, the app is
opened in AppTest (the server's Python, no browser: the browser draws the same figures either way), the
model, limit and text applied on Model facts (the analysis timed: the first page's cost), then every
page is opened (first visit), then every page again (second visit). Printed: the analysis and each page's
median times under both settings and their ratio long ÷ dense. The dense setting is every run up to 1 GiB
(the default before issue 52's threshold was questioned); the long one is `--long-mb` (issue 52 suggests
64 MiB): MiniLM at 512 tokens (75 MB) and SmolLM2 at 256 (71 MB) are long runs under it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pages import SETUPS, long_text  # noqa: E402 - benchmarks/pages.py, beside this script
from pages_profile import run_page  # noqa: E402 - one page switch in AppTest, timed

DENSE_MB = 1024


def sweep(setup: str, pages: list[str]) -> dict:
    """One process's measures: the analysis and each page's first and second visit, in seconds."""
    from mha_viz.ui.kit import keys
    from tests.app.helpers import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
    at.run()
    model, tokens, text = SETUPS[setup]  # pages.py's setup: its model, Token limit and text (None: the long one)
    if model != "minilm":
        at.selectbox(key=keys.MODEL_CHOICE).set_value(model).run()
    run_page(at, "model_facts")
    at.number_input(key=keys.TOKEN_LIMIT).set_value(tokens).run()
    start = time.perf_counter()
    at.text_area(key=keys.TEXT).input(text or long_text()).run()
    analysis = time.perf_counter() - start
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    run = at.session_state[keys.CURRENT].run
    out = {"analysis": analysis, "n": run.n, "dense": bool(run.is_dense), "first": {}, "second": {}}
    for visit in ("first", "second"):
        for page in pages:
            out[visit][page] = run_page(at, page)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setups", default="minilm,smollm2")
    parser.add_argument("--pages", default="", help="comma-separated page ids (default: every page)")
    parser.add_argument("--long-mb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from mha_viz.ui.shell import navigation as app_pages

    wanted = [p for p in args.pages.split(",") if p] or [p.id for p in app_pages.PAGES]
    if args.child:
        print(json.dumps(sweep(args.child, wanted)))
        return
    for setup in [s for s in args.setups.split(",") if s]:
        results: dict[int, list[dict]] = {DENSE_MB: [], args.long_mb: []}
        for _ in range(max(1, args.rounds)):
            for mb in results:
                env = {**os.environ, "MHA_VIZ_DENSE_MB": str(mb)}
                done = subprocess.run([sys.executable, __file__, "--child", setup, "--pages", ",".join(wanted)],
                                      env=env, capture_output=True, text=True, check=True)
                results[mb].append(json.loads(done.stdout.strip().splitlines()[-1]))
        dense, long_ = results[DENSE_MB], results[args.long_mb]
        kinds = {mb: {r["dense"] for r in rs} for mb, rs in results.items()}
        print(f"\n{setup}: {dense[0]['n']} tokens; MHA_VIZ_DENSE_MB={DENSE_MB}: dense {kinds[DENSE_MB]}, "
              f"={args.long_mb}: dense {kinds[args.long_mb]}; medians of {len(dense)} rounds\n")
        print(f"| {'page':24s} | visit  | dense s | long s | long ÷ dense |")
        print(f"|{'-' * 26}|--------|---------|--------|--------------|")

        def line(label: str, visit: str, a: list[float], b: list[float]) -> None:
            ma, mb_ = statistics.median(a), statistics.median(b)
            print(f"| {label:24s} | {visit:6s} | {ma:7.3f} | {mb_:6.3f} | {mb_ / max(ma, 1e-9):12.2f} |")

        line("analysis", "", [r["analysis"] for r in dense], [r["analysis"] for r in long_])
        for visit in ("first", "second"):
            for page in wanted:
                line(page, visit, [r[visit][page] for r in dense], [r[visit][page] for r in long_])
            total_a = [sum(r[visit].values()) for r in dense]
            total_b = [sum(r[visit].values()) for r in long_]
            line("every page", visit, total_a, total_b)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
