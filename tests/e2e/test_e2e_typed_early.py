"""Nothing typed is lost (issue 20): a student opens the link and types a sentence at once,
pressing Ctrl+Enter while the session's first run is still going. What the user typed must win
over anything the app sets before a run: the box keeps the sentence, and the head view shows its
tokens.

8 fresh sessions at once, each typing its sentence as soon as its text box takes input: a round on a warm
server (the suite's shared one, `server`), and a round on a server that has just started (whose first script
runs are these sessions'). On the warm server the sessions alternate between MiniLM and SmolLM2: several people
at once on two models, each seeing its own tokens, each model loaded once for all (this round was the separate
test_e2e_concurrent, whose eight sessions did the same on links to the head view).
MHA_VIZ_E2E_ROUNDS=3 runs three rounds of each (by hand, as the fix was checked; `make test` runs one: each
round costs about 50 s on 2 cores). Each session opens a link with a draft sentence
of its own (a teacher's link; the student replaces the sentence at once), so that its first run has an
analysis of its own to compute while the typing lands. The sessions are driven with playwright's async API, in
a thread of their own, so that no session waits for another's typing; each reports how long after its box
appeared it typed.

Before the fix (the sidebar's inputs were put back from a copy before each run, and a value
written by code wins over the browser's in Streamlit), a session lost its sentence in 1 of 24 on
a loaded warm server (the box showed the typed sentence, every view the example's tokens), and 1
of 8 in a round on a server just started: one round of each does not catch every such race, which is why
the rounds can be raised. (Until stop 73 this test itself lost 1 SmolLM2 session in 6 to 24 on a loaded machine:
it looked again at a view still on the draft only when a tick was the word "draft", which is MiniLM's token and
not SmolLM2's "␣draft"; the server's trace showed the typed sentence's run, about 20 s after the keypress.)
(The issue asks for typing within 100 ms of the box
appearing; on a loaded 2-core machine, 8 tabs drawing at once, the browser itself takes seconds
to make the box take input: each round prints how long it took.)
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
import urllib.parse

import pytest

from .conftest import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    IDLE_PROBE,
    RUN_TIMEOUT_S,
    TICKS_PROBE,
    ZW,
    open_app,
    start_server,
)

pytestmark = pytest.mark.e2e
SESSIONS = 8
ROUNDS = int(os.environ.get("MHA_VIZ_E2E_ROUNDS", "1"))
SETTLE_S = 60  # how long a view still on the draft is looked at again (see _one_session)
BOX = "[data-testid=stSidebar] textarea[aria-label=Sentence]"
# notes (performance.now()) the moment the sidebar's text box first appears
BOX_OBSERVER = """
(() => {
  window.__boxSeen = null;
  const look = () => {
    if (window.__boxSeen === null && document.querySelector('%s')) window.__boxSeen = performance.now();
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true});
})();
""" % BOX
WORDS = ["zebras", "kettles", "mosaics", "tunnels", "pebbles", "candles", "parrots", "ladders"]


async def _one_session(browser, url: str, text: str) -> dict:
    """A new session on `url` that types `text` as soon as its box takes input; what it then shows."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(RUN_TIMEOUT_S * 1000)
    await context.add_init_script(BOX_OBSERVER)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        await page.goto(url, wait_until="commit")
        box = page.locator(BOX)
        await box.fill(text)  # waits for the box, then types
        await box.press("Control+Enter")
        typed_ms = await page.evaluate("() => performance.now() - window.__boxSeen")
        await page.locator("[data-testid=stSidebar] [data-testid=InputInstructions]").wait_for(state="hidden")
        # Idle, and showing the typed sentence's tokens: on a loaded machine the browser may look
        # idle before the rerun that Ctrl+Enter asked for has started, or before Plotly has drawn
        # the chart's labels, so a view still on the draft (or without labels yet) is looked at
        # again, for up to SETTLE_S. A lost sentence stays lost: the draft's view never changes,
        # since no rerun is coming.
        settle_until = time.monotonic() + SETTLE_S
        while True:
            quiet, idle_until, state = 0, time.monotonic() + RUN_TIMEOUT_S, ""
            while quiet < 3:  # idle three polls in a row, within one run's time (a page stuck busy fails)
                state = await page.evaluate(IDLE_PROBE)
                quiet = 0 if state else quiet + 1
                if time.monotonic() > idle_until:
                    raise AssertionError(f"the page did not become idle within {RUN_TIMEOUT_S} s ({state})")
                await page.wait_for_timeout(150)
            chart = page.locator("[data-testid=stMain] [data-testid=stPlotlyChart]").first
            await chart.wait_for()
            labels = await chart.evaluate(TICKS_PROBE, "x")
            ticks = [t.split(ZW, 1)[0] for t, _ in sorted(labels, key=lambda item: item[1])]
            # drawn (its labels in place: a chart still being drawn has none yet), and not the draft's: a word of
            # it ("draft") is a token of its own in MiniLM's vocabulary, "␣draft" in SmolLM2's
            if (ticks and not any("draft" in tick for tick in ticks)) or time.monotonic() > settle_until:
                break
            await page.wait_for_timeout(500)
        return {"typed_ms": typed_ms, "box": await box.input_value(), "errors": errors, "ticks": ticks,
                "exceptions": await page.locator("[data-testid=stException]").all_inner_texts(),
                # what the page said (a refusal, a busy server, the last good run shown): why, when it is not its own
                "said": await page.locator("[data-testid=stMain] [data-testid=stAlert], "
                                           "[data-testid=stMain] [data-testid=stCaptionContainer]").all_inner_texts()}
    except BaseException:
        await page.screenshot(path=str(ARTIFACTS / f"typed-early-FAILED-{text[:28].replace(' ', '_')}.png"))
        raise
    finally:
        await context.close()


async def _crowd(urls: list[str], texts: list[str]) -> list[dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            return await asyncio.gather(*(_one_session(browser, u, t) for u, t in zip(urls, texts)))
        finally:
            await browser.close()


def crowd(urls: list[str], texts: list[str]) -> list[dict]:
    """`_crowd` in a thread of its own (the other tests' sync playwright owns this thread's loop)."""
    out: dict = {}

    def work() -> None:
        try:
            out["result"] = asyncio.run(_crowd(urls, texts))
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=work, name="typed-early", daemon=True)  # a hung crowd never holds the exit
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


def _round(base_url: str, rep: int, run_of, label: str, models: list[str]) -> list[str]:
    """SESSIONS fresh sessions typing at once, session i on models[i]; the problems found, one line each."""
    texts = [f"Student {i} types about {WORDS[i % len(WORDS)]} in round {rep}." for i in range(SESSIONS)]
    drafts = [urllib.parse.quote(f"A draft sentence {i} for round {rep}.") for i in range(SESSIONS)]
    results = crowd([f"{base_url}/head_view?model={m}&text={d}" for m, d in zip(models, drafts)], texts)
    run_of = run_of()  # only now: the crowd had the cores to itself
    problems = []
    for i, (got, text, model) in enumerate(zip(results, texts, models)):
        expected = run_of(model, text).tokens
        if got["box"] != text:
            problems.append(f"{label} session {i}: the box holds {got['box']!r}, not the typed {text!r}")
        elif got["ticks"] != expected:
            problems.append(f"{label} session {i} ({model}): shows {got['ticks'][:8]}, not its own tokens "
                            f"{expected[:8]}; the page said {[s[:160] for s in got['said']]}")
        if got["exceptions"] or got["errors"]:
            problems.append(f"{label} session {i}: {got['exceptions'] or got['errors']}")
    print(f"\n{label}: typed {min(r['typed_ms'] for r in results):.0f} to {max(r['typed_ms'] for r in results):.0f} ms "
          f"after the box appeared; {SESSIONS - len(problems)} of {SESSIONS} kept their sentence")
    return problems


def _loads(log_text: str) -> list[str]:
    """The models a server's log says it loaded, one entry a load."""
    return re.findall(r"model loaded: (\S+) \(device (\S+), our MHA (\S+)\)", log_text)


def test_sentences_typed_at_once_on_a_warm_server_are_kept(server, server_log, browser, run_of):
    """On the shared server (tests/e2e/conftest.py's `server`): warm, and loaded by the other tests' sessions.
    Its sessions alternate between MiniLM and SmolLM2 (several people at once, on two models): each shows its
    own sentence's tokens in its own model's tokenizer, and each model is loaded at most once for all of them
    (the server logs every load; the cache may hold it from an earlier test already)."""
    open_app(browser, server, "warm-up").close()  # the server's script has run: warm
    before = len(server_log.read_text(errors="replace"))
    models = ["smollm2" if i % 2 else "minilm" for i in range(SESSIONS)]
    problems = []
    for rep in range(ROUNDS):
        problems += _round(server, rep, lambda: run_of, f"warm server, round {rep}", models)
    assert not problems, "typed sentences were lost:\n" + "\n".join(problems)
    loads = _loads(server_log.read_text(errors="replace")[before:])  # during this test only
    assert len(loads) == len(set(loads)), f"a model was loaded more than once: {loads}"


def test_sentences_typed_at_once_on_a_server_just_started_are_kept(e2e_ready, request):
    problems = []
    for rep in range(ROUNDS):
        with start_server(ARTIFACTS / f"server-typed-early-{rep}.log") as base_url:
            problems += _round(base_url, rep, lambda: request.getfixturevalue("run_of"),
                               f"server just started, round {rep}", ["minilm"] * SESSIONS)
    assert not problems, "typed sentences were lost on a server just started:\n" + "\n".join(problems)
