"""mha-viz: see what every attention head of a transformer does.

The frame and router: page config, the shared sidebar (model, device, text), then the chosen
view. Run with `mha-viz` (an installed package), `make run` or `streamlit run app.py`.

Two scripts serve it: the repository's `app.py` and, from an installed package, `serve.py` (what
the `mha-viz` command runs). Each is read twice: `streamlit run <script>` finds `app` (an
`st.App`) in the script's source and serves it, the server importing the script as a module, and
`preload.lifespan` imports what the pages use and loads the default model before the server
answers anything, health check included. Each browser session then runs the script as `__main__`
(AppTest too), which calls `main()` here.
"""

import logging
import time

import streamlit as st
import torch

from mha_viz.budget import memory, turns
from mha_viz.capture.head_rows import DenseRefused
from mha_viz.scan import torch_threads
from mha_viz.text import session_cap
from mha_viz.ui.kit import analysis, resources, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import (
    export_views,
    lesson_flow,
    lesson_panel,
    links,
    notebook_button,
    preload,
    run_trace,
    sidebar,
    state,
)
from mha_viz.ui.shell import (
    navigation as pages,
)

_log = logging.getLogger("mha_viz")
if not _log.handlers:  # once per server: model loads and failures go to the server's log
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    _log.addHandler(_handler)
    _log.setLevel(logging.INFO)


DRAWN_BEFORE = "_drawn_before"  # set by a session's first run, once its page is drawn
BEGAN = "_began"  # when the session's first run asked for its turn (the rank of its later runs' turns)


def guarded(step, *args, what: str) -> None:
    """`step(*args)`, an extra of the frame (links, export): if it fails, a notice and the log,
    never a traceback; the sidebar and the page still draw."""
    try:
        step(*args)
    except Exception:  # noqa: BLE001 - Streamlit's own reruns and stops are BaseExceptions: they pass
        logging.getLogger("mha_viz.ui").exception("%s failed", what)
        st.warning(f"{what} did not work this time; the rest of the app is unaffected.", icon=":material/warning:")


@run_trace.traced  # off unless MHA_VIZ_RUN_TRACE names a file (benchmarks/pages.py)
def main() -> None:
    """One run of the script: a session's page, drawn, in a turn of the process's (`turns`: when a class arrives
    at once, a few runs compute at a time and the first end first)."""
    preload.warm()  # done by the server's start; where it was not, other sessions wait here
    with turns.turn(session.setdefault(BEGAN, time.monotonic())):  # a session's next step before a newcomer's
        _draw()


def _draw() -> None:
    torch_threads.settle()  # this run's thread may have first read PyTorch's count while a scan's worker held 1
    st.set_page_config(page_title="mha-viz: attention heads", page_icon=":material/search:", layout="wide")
    page = pages.navigation()
    # a session's first run: a lesson (the link's or the server's) and a shared link's model, text and
    # options, before the sidebar draws them
    guarded(lesson_flow.read_link, what="Opening the lesson")
    guarded(links.read, pages.page_id(page), what="Reading the link")
    pages.follow_goto()  # a view (e.g. "Open in head view") or a lesson's step asked for another page
    # No page can run a longer text than this session's cap (callbacks run before this line: they
    # only record choices, they never compute)
    with session_cap(resources.token_cap()):
        guarded(lesson_flow.bar, what="The lesson's steps")  # above the view: Step k of N, Back, Next
        cur = state.publish(sidebar.draw())
        # the link's layer and head, once the model is known
        guarded(links.apply_pending, cur, what="The link's layer and head")
        guarded(export_views.sidebar_box, cur, what="The Export box")
        guarded(lesson_flow.note, pages.page_id(page), what="The lesson's note")  # the step's note above the view
        out_of_memory = False
        try:
            page.run()
            guarded(notebook_button.offer_notebook, pages.page_id(page), page.title, cur, what="Open as notebook")
        except DenseRefused as exc:  # a long run's every head asked for where it would not fit: what fits
            st.warning(plain(str(exc)), icon=":material/straighten:")
        except (MemoryError, torch.OutOfMemoryError):  # any page's heavy work: a message, memory given back
            logging.getLogger("mha_viz.ui").exception("view ran out of memory")
            out_of_memory = True
        except Exception as exc:  # noqa: BLE001 - a view that fails shows a message, never a traceback
            logging.getLogger("mha_viz.ui").exception("view failed")
            st.error(plain(f"This view could not be drawn ({type(exc).__name__}: {str(exc)[:200]}). ")
                     + "Your text and choices are kept: try another input or view.")
        if out_of_memory:  # after the handler: the failed frames are gone, their memory can go back
            memory.free_cache()
            st.error("This view needs more memory than is free. " + memory.OUT_OF_MEMORY_ADVICE
                     + " Your text and choices are kept.", icon=":material/warning:")
        # the URL follows the view; the sidebar's Share box
        guarded(links.share, page, cur, lesson_flow.url_params(), what="The Share box")
        guarded(lesson_panel.panel, page, cur, what="The Lesson panel")
        # the page is drawn: what depends on the model's weights alone is computed ahead (seconds, once per model),
        # or a large model's read back where an earlier process kept it, from a session's second run on (its first
        # draws the landing page, whose first chart comes first), unless the server computes it only when asked
        # (MHA_VIZ_AHEAD=0)
        if session.get(DRAWN_BEFORE) and resources.settings().ahead:
            guarded(analysis.ahead_of_visits, cur.model, what="Computing ahead")
        session.put(DRAWN_BEFORE, True)

