"""How `make test` hands out the suite (tests/scheduling.py), on this suite's own files: every browser test is of
one group, run by one process with one server and one browser; any other test is of its file's group; the browser
group goes out first, then the tiers in FIRST's order, each tier's files in the order they came."""

from __future__ import annotations

from pathlib import Path

from tests.scheduling import BROWSER, FIRST, group, hand_out

ROOT = Path(__file__).resolve().parents[2]


def _files(tier: str) -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / tier).glob("test_*.py"))


def test_every_browser_test_is_of_one_group_and_any_other_of_its_files():
    browser = _files("e2e")
    assert len(browser) > 10  # the walk found the browser files
    ids = [f"{f}::test_x[{p}]" for f in browser for p in ("minilm", "a::b")]
    assert {group(i) for i in ids} == {BROWSER}
    for tier in ("app", "models", "unit"):
        for f in _files(tier):
            assert group(f"{f}::test_y") == group(f"{f}::TestZ::test_y[smollm2]") == f


def test_the_browser_group_goes_out_first_then_each_tier_in_its_order():
    files = {tier: _files(tier) for tier in ("app", "models", "unit")}
    mixed = [files["unit"][0], files["models"][0], BROWSER, files["app"][1], files["unit"][1], files["app"][0],
             "conftest.py"]
    assert hand_out(mixed) == [BROWSER, files["app"][1], files["app"][0], files["models"][0], files["unit"][0],
                               files["unit"][1], "conftest.py"]
    assert FIRST[0] == BROWSER.split("/")[1]
