"""The class client (`class_client`, which `benchmarks/class.py` and `test_e2e_class` stand students on) asks the server
for what Chromium asks for, step by step (issue 91): a tab and a client student each land on the same link, type the
same sentence and open the Head view, and each rerun the tab's websocket sent (a `BackMsg` whose `rerun_script` is set)
is the client's: the same page, query, widgets and values, hashes of the elements received, and context. A client
that sent fewer widgets than the browser (as until stop 128: the Sentence box alone) or kept a query the browser
drops costs the server another amount of work than a class of browsers does."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from google.protobuf.json_format import MessageToDict
from streamlit.proto.BackMsg_pb2 import BackMsg

from .class_client import Seen, Session, class_of, connect, sentence_of
from .conftest import RUN_TIMEOUT_S, new_app

LINK = "model=minilm"
STEPS = ("landing", "the sentence", "the Head view")


def reruns(requests: list[BackMsg]) -> list[dict]:
    """Each rerun request as what matters to the server: its page, query, widgets ({id: value}), the hashes of the
    elements the browser has, and its context."""
    out = []
    for msg in requests:
        rerun = msg.rerun_script
        out.append({"page": rerun.page_script_hash, "query": rerun.query_string,
                    "widgets": {w["id"]: {k: v for k, v in w.items() if k != "id"}
                                for w in MessageToDict(rerun.widget_states).get("widgets", [])},
                    "cached": set(rerun.cached_message_hashes), "context": MessageToDict(rerun.context_info)})
    return out


def test_the_class_client_asks_for_what_chromium_asks_for(server, browser):
    sentence = sentence_of("giraffe")
    sent: list[bytes] = []
    ui = new_app(browser, server, "class-client")
    try:
        ui.page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(payload)))
        ui.page.goto(f"{server}/?{LINK}", wait_until="domcontentloaded")
        ui.page.locator("[data-testid=stPlotlyChart]").first.wait_for(timeout=RUN_TIMEOUT_S * 1000)
        ui.wait_idle()
        ui.set_text(sentence)
        ui.goto("Head view")
    finally:
        ui.close()
    chromium = [BackMsg.FromString(payload) for payload in sent if isinstance(payload, bytes)]
    chromium = [msg for msg in chromium if msg.HasField("rerun_script")]
    student = class_of(server, [sentence], LINK)[0]
    assert not student.errors, student.errors
    browser_steps, client_steps = reruns(chromium), reruns(student.asked)
    assert len(browser_steps) == len(client_steps) == len(STEPS), (len(browser_steps), len(client_steps))
    for step, ours, theirs in zip(STEPS, client_steps, browser_steps):
        assert ours == theirs, (step, ours, theirs)
    # what the comparison stands on: the sentence among the widgets, the sidebar's alone on another page
    assert any(w.get("stringValue") == sentence for w in browser_steps[1]["widgets"].values())
    assert len(browser_steps[2]["widgets"]) < len(browser_steps[1]["widgets"])
    assert browser_steps[2]["cached"]


def test_an_element_sent_again_as_a_reference_is_read_from_what_the_client_kept(server):
    """The same sentence applied twice draws the same Model view chart: the server, told that the client has it,
    sends a reference the second time (`ref_hash`), and the client reads the chart from what it kept."""
    async def twice() -> tuple[list[str], list[str], int]:
        async with connect(server) as socket:
            session = Session(socket, Seen(sentence_of("pelican")), server)
            await session.run(query=LINK)
            typed = {session.box_id: session.seen.sentence}
            await session.run(page=session.page, widgets=typed)
            first, before = list(session.seen.charts), session.references
            await session.run(page=session.page, widgets=typed)
            return first, list(session.seen.charts), session.references - before

    with ThreadPoolExecutor(1) as thread:  # a loop of its own: the browser tests' playwright runs one in this thread
        first, again, references = thread.submit(asyncio.run, twice()).result()
    assert references >= 1
    assert first and again == first
