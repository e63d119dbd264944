"""How messages write a count of things: "1 head", "9 heads", "1 query row" (`plural`), one rule for every
page, figure and report."""

from __future__ import annotations

_IRREGULAR = {"query": "queries", "this": "these", "was": "were", "has": "have"}


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`n` and `noun`, the noun in the plural unless n is 1: plural(1, "head") is "1 head", plural(9, "query
    row") "9 query rows", plural(2, "query") "2 queries". `many`: the plural when it is neither the noun + s
    nor a known irregular one. Counts of 1,000 and more are written with commas."""
    if int(n) == 1:
        return f"1 {noun}"
    if many is None:
        head, _, last = noun.rpartition(" ")
        last = _IRREGULAR.get(last) or (last + "es" if last.endswith(("s", "x", "ch", "sh")) else last + "s")
        many = f"{head} {last}" if head else last
    return f"{int(n):,} {many}"
