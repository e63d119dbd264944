"""benchmarks/pages.py's tables: each page and each in-page choice against its bare twin, then each
click's timeline (benchmarks/timeline.py), compact."""

from __future__ import annotations

import statistics

import timeline

SECOND_X, FIRST_X, CHOICE_X = 2.0, 4.0, 2.0  # issue 59's targets, × the bare twin


def slower(runs: list[dict]) -> dict:
    """The slower try of an in-page choice (there or back), on both sides: a first drawing (ours: a part's figures
    sent whole, a new head computed; the twin's: its new random data) counts the same way on each."""
    return max(runs, key=lambda run: run["s"])


def median(runs: list[dict]) -> dict:
    """The run of median time (the upper one of an even count), with "s" the true median (its timeline
    keeps its own time: "own")."""
    pick = sorted(runs, key=lambda r: r["s"])[len(runs) // 2]
    return {**pick, "s": statistics.median(r["s"] for r in runs), "own": pick["s"]}


def _runs(r: dict) -> str:
    done = [x for x in r["runs"] if x["how"] == "done"]
    return f"{len(r['runs'])}" + ("" if len(done) == len(r["runs"]) else f" ({len(r['runs']) - len(done)} cut)")


def _drawn_after(r: dict) -> float:
    """What the browser spends after the server's last message: done minus the last message."""
    return r["s"] - timeline.last_msg(r)


def print_setup(r: dict, twin: dict, repeat: int, setup: tuple[str, int]) -> list[tuple[str, str, bool]]:
    name, (model, limit) = r["setup"], setup
    print(f"\n{name}: {model}, Token limit {limit}, {r['tokens']} tokens shown; second visit: median of {repeat}; "
          "× twin: the time over the bare twin's, same click, same run\n")
    head = ("| page                       | 1st s | twin | ×twin | 2nd s | twin | ×twin | runs | KiB sent | "
            "last msg s | drawn after s | verdict |")
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    over = []
    for title, _ in r["links"]:
        f, s = r["first"][title], median(r["second"][title])
        tf, ts = twin["first"][title], median(twin["second"][title])
        x1, x2 = f["s"] / tf["s"], s["s"] / ts["s"]
        bad = [w for w, b in ((f"2nd > {SECOND_X:g}×", x2 > SECOND_X), (f"1st > {FIRST_X:g}×", x1 > FIRST_X)) if b]
        over += [f"{title} {w}" for w in bad]
        print(f"| {title:26s} | {f['s']:5.2f} | {tf['s']:4.2f} | {x1:5.1f} | {s['s']:5.2f} | {ts['s']:4.2f} | "
              f"{x2:5.1f} | {_runs(s):4s} | {s['bytes'] / 1024:8,.0f} | {timeline.last_msg(s):10.2f} | "
              f"{_drawn_after(s):13.2f} | {', '.join(bad) or 'ok':7s} |")
        for p in f["problems"] + s["problems"]:
            print(f"|   ! {title}: {p[:160]}")
    choice_over = []
    rows = [(f"{page}: {r['whats'][page]}", runs, twin["choices"].get(page)) for page, runs in r["choices"].items()]
    rows += [(f"Teaching, {label}", runs, twin["choices"].get(f"{timeline_title(label)}"))
             for label, runs in r["parts"].items()]
    if rows:
        print("\n| in-page choice (there, back)              | there s | back s | twin s | ×twin | runs | KiB sent "
              "| verdict |")
        print("|-------------------------------------------|---------|--------|--------|-------|------|----------"
              "|---------|")
    for label, runs, twin_runs in rows:
        t = slower(twin_runs) if twin_runs else None
        x = slower(runs)["s"] / t["s"] if t else float("nan")
        ok = t is not None and x <= CHOICE_X
        if not ok:
            choice_over.append(f"{label} {x:.1f}×")
        print(f"| {label:41s} | {runs[0]['s']:7.2f} | {runs[1]['s']:6.2f} | {t['s'] if t else float('nan'):6.2f} | "
              f"{x:5.1f} | {_runs(runs[0]):4s} | {runs[0]['bytes'] / 1024:8,.0f} | {'ok' if ok else 'over':7s} |")
    print(f"\nTimelines ({name}; s after the click; runs: the script's, from the server's trace):")
    for title, _ in r["links"]:
        print(f"  {title}")
        print(f"    1st   {timeline.line(r['first'][title])}")
        print(f"    2nd   {timeline.line(median(r['second'][title]))}")
        print(f"    twin  {timeline.line(median(twin['second'][title]))}")
    for label, runs, twin_runs in rows:
        print(f"  {label}")
        for tag, x in zip(("there", "back "), runs):
            print(f"    {tag} {timeline.line(x)}")
        if twin_runs:  # the try the ratio reads: the slower
            print(f"    twin  {timeline.line(slower(twin_runs))}")
    worst = max((t for t, _ in r["links"]),
                key=lambda t: median(r["second"][t])["s"] / median(twin["second"][t])["s"])
    return [(f"every page ≤ {SECOND_X:g} × twin 2nd, ≤ {FIRST_X:g} × 1st ({name})",
             (f"{len(over)} over: " + ", ".join(over))[:60] if over else f"worst 2nd {worst}", not over),
            (f"in-page choices ≤ {CHOICE_X:g} × twin ({name})",
             (", ".join(choice_over))[:60] or "all within", not choice_over)]


AGAINST_X = 1.10  # a change may make no page's second visit, and no in-page choice, slower than this × before


def pooled(sessions: list[dict]) -> dict:
    """Several sessions' measurements of one app as one: each page's first visits and second visits pooled (their
    median is read), each choice's and part's tries pooled (their median: a choice's there and back alike)."""
    out = dict(sessions[0])
    out["first"] = {t: median([r["first"][t] for r in sessions]) for t in sessions[0]["first"]}
    out["second"] = {t: [x for r in sessions for x in r["second"][t]] for t in sessions[0]["second"]}
    out["choices"] = {c: [x for r in sessions for x in r["choices"][c]] for c in sessions[0]["choices"]}
    out["parts"] = {c: [x for r in sessions for x in r["parts"][c]] for c in sessions[0]["parts"]}
    return out


def print_against(after: dict, before: dict, against: str) -> list[tuple[str, str, bool]]:
    """This checkout's times (`after`) against another's (`before`, `--against`), measured in the same run, each
    pooled over its sessions (`pooled`): each page's first visit and second visits, and each in-page choice's tries,
    by their medians, with the ratio after / before; a verdict that none is over AGAINST_X."""
    name = after["setup"]
    print(f"\n{name}: this checkout (after) against {against} (before), same clicks, same run\n")
    print("| page or choice                             | 1st before | 1st after | 2nd before | 2nd after | × before |")
    print("|--------------------------------------------|------------|-----------|------------|-----------|----------|")
    over, worst = [], (0.0, "")
    for title, _ in after["links"]:
        if title not in before["first"]:
            print(f"| {title:42s} | (not in the other checkout) |")
            continue
        f0, f1 = before["first"][title]["s"], after["first"][title]["s"]
        s0, s1 = median(before["second"][title])["s"], median(after["second"][title])["s"]
        x = s1 / s0
        worst = max(worst, (x, title))
        if x > AGAINST_X:
            over.append(f"{title} {x:.2f}×")
        print(f"| {title:42s} | {f0:10.2f} | {f1:9.2f} | {s0:10.2f} | {s1:9.2f} | {x:8.2f} |")
    choices = [(f"{page}: {after['whats'][page]}", runs, before["choices"].get(page))
               for page, runs in after["choices"].items()]
    choices += [(f"Teaching, {label}", runs, before["parts"].get(label)) for label, runs in after["parts"].items()]
    for label, runs, old in choices:
        if not old:
            continue
        s0, s1 = median(old)["s"], median(runs)["s"]
        x = s1 / s0
        worst = max(worst, (x, label))
        if x > AGAINST_X:
            over.append(f"{label} {x:.2f}×")
        print(f"| {label:42s} | {'':10s} | {'':9s} | {s0:10.2f} | {s1:9.2f} | {x:8.2f} |")
    return [(f"no page or choice > {AGAINST_X:.2f} × before ({name})",
             (f"{len(over)} over: " + ", ".join(over))[:60] if over else f"worst {worst[1]} {worst[0]:.2f}×",
             not over)]


def timeline_title(label: str) -> str:
    """The bare twin's page for a part of the Teaching page (pages.measure_twin names it so)."""
    return f"Teaching: step by step · {label}"
