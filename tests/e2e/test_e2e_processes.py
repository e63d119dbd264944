"""A lecture hall's deployment in a real browser (issue 91): `mha-viz app --processes 2` starts two app processes behind
nginx. Four students, each a browser context of its own (its own cookies, as four laptops), open the app on a
sentence of their own at once: nginx hands them to the two processes in turn, two each; each one's Model view
draws its palette image (a Plotly layout image fetched from the server's media), served by the process that holds
its session (every media request answered, all by one process: nginx kept the student on the process its cookie
names), and each one's Head view shows its own sentence and no other's. (Six students until stop 117: each costs
Chromium two page loads, about 3 CPU-s each on 2 cores, in a suite bound by its cores.)"""

from __future__ import annotations

import collections
import sys
import urllib.parse

import pytest

from mha_viz.launch_group import UPSTREAM_HEADER, nginx_binary

from ..waiting import wait_until
from .conftest import ARTIFACTS, TICKS_PROBE, ZW, _in_ci, start_server

pytestmark = pytest.mark.e2e
ANIMALS = ("dog", "horse", "sheep", "tiger")  # one MiniLM token each


@pytest.fixture
def nginx():
    if nginx_binary() is None:
        reason = "the two-process deployment needs nginx (apt-get install nginx-light; .ci/run installs it)"
        if _in_ci():
            pytest.fail(reason + " (CI=true: this test must run in CI)", pytrace=False)
        pytest.skip(reason)


def _group(port: int) -> list[str]:
    return [sys.executable, "-m", "mha_viz", "app", "--processes", "2", "--port", str(port)]


def _ticks(page) -> list[str]:
    chart = page.locator("[data-testid=stMain] [data-testid=stPlotlyChart]").first
    if not chart.count():
        return []
    labels = chart.evaluate(TICKS_PROBE, "x")
    return [text.split(ZW, 1)[0] for text, _ in labels]


def test_two_processes_behind_nginx_keep_each_student_on_its_own(nginx, isolated_browser, tmp_path):
    with start_server(ARTIFACTS / "processes.log", command=_group, cwd=tmp_path) as base:
        students = []
        for animal in ANIMALS:  # every student's first page at once: four sessions arriving together
            context = isolated_browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            media: list[tuple[int, str | None]] = []
            page.on("response", lambda r, seen=media: seen.append((r.status, r.headers.get(UPSTREAM_HEADER.lower())))
                    if "media" in urllib.parse.urlsplit(r.url).path.split("/")[:-1] else None)
            text = f"The {animal} ran home."
            page.goto(f"{base}/?{urllib.parse.urlencode({'model': 'minilm', 'text': text})}", wait_until="commit")
            students.append((animal, text, context, page, media))
        for animal, text, context, page, media in students:
            page.locator("[data-testid=stMain] [data-testid=stPlotlyChart]").first.wait_for(timeout=120_000)
            assert wait_until(lambda seen=media: any(s == 200 for s, _ in seen), 60, interval_s=0.2), media
            assert all(status == 200 for status, _ in media), (animal, media)  # none asked of the wrong process
            assert len({upstream for _, upstream in media}) == 1, (animal, media)
            head = context.new_page()  # the same student (its cookie) on the Head view: a session of its own
            head.goto(f"{base}/head_view?{urllib.parse.urlencode({'model': 'minilm', 'text': text})}")
            assert wait_until(lambda h=head: animal in _ticks(h), 120, interval_s=0.25), _ticks(head)
            shown = _ticks(head)
            assert not [other for other in ANIMALS if other != animal and other in shown], shown
            assert not head.locator("[data-testid=stException]").count()
        by_process = collections.Counter(media[0][1] for *_, media in students)
        print(f"students by process: {dict(by_process)}")
        assert sorted(by_process.values()) == [2, 2], by_process  # in turn: by chance, 3 classes in 8 split 2 and 2
        for *_, context, _page, _media in students:
            context.close()
