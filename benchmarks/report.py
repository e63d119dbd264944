"""The closing table every benchmark prints: each target, what was measured, and the verdict."""

from __future__ import annotations


def print_verdicts(verdicts: list[tuple[str, str, bool | None]], *, target_width: int = 56, value_width: int = 40,
                   where: str = "") -> None:
    """verdicts: (target, measured, met) rows, printed as a Markdown table and a count; met None: a
    row measured for the record, with no target."""
    print(f"\n| {'target':{target_width}s} | {'measured':{value_width}s} | verdict |")
    print(f"|{'-' * (target_width + 2)}|{'-' * (value_width + 2)}|---------|")
    for target, value, met in verdicts:
        verdict = "—" if met is None else "met" if met else "NOT met"
        print(f"| {target:{target_width}s} | {value:{value_width}s} | {verdict:7s} |")
    targets = [m for *_, m in verdicts if m is not None]
    print(f"\n{sum(targets)} of {len(targets)} targets met" + (f" ({where})" if where else ""))
