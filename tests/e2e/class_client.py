"""A class of students on one server, each a session of Streamlit's own websocket protocol (issue 91), without a
browser: what a browser sends for the steps a student takes, and what the server sends back, read.

A student connects to `/_stcore/stream` and asks for the first run (a `BackMsg` whose `rerun_script` names no page
and no widget: the landing page, with the link's query). From the messages of that run it learns the sidebar's
*Sentence* box's widget id (the element whose id ends with its key, `keys.TEXT`), the pages' script hashes (the
navigation message) and every widget the run drew with its value. It then types its sentence (a rerun with the box's
value among the widget states, as the browser sends it on Ctrl+Enter) and opens the Head view (a rerun naming that
page's script hash). Each rerun carries what Chromium sends for the same step (`tests/e2e/test_e2e_class_client.py`
compares them): the value of every widget of the last run that a browser holds a value for from its first drawing
(boxes, pickers, number inputs, radios, checkboxes; a button, a chart or an expander only once used, which a student
here never does), only the sidebar's where the rerun opens another page, the page's query while it stays on the page,
the hashes of the large elements it has received (the server then sends a reference to one it would send again,
`ref_hash`, read here from what was kept) and the browser's context (time zone, locale, address, colour scheme). A
run ends at its `script_finished` message; one that ended early for another rerun (the app's own `st.rerun`) is
followed by that rerun's messages, until one finishes.

What each student saw is kept for the caller: every chart's spec and every text element of its Head view run, the
errors and exceptions of any run, and when each step ended (`Seen`). `class_of` runs a whole class at once in one
event loop (`asyncio.gather`), each student started at the same moment.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from mha_viz.drawing.style import label_text
from mha_viz.ui.kit import keys

FINISHED = (0, 1)  # ScriptFinishedStatus: successfully, with a compile error (2: early, for another rerun)
RUN_TIMEOUT_S = 600  # one student's run at most (300 students on 2 cores queue behind each other)


@dataclass
class Seen:
    """What one student's session showed: `charts` (each Plotly spec, JSON) and `texts` (markdown, captions, titles,
    alerts) of its last run (the Head view), the `errors` of every run (exceptions and error alerts), the seconds
    from the class's start to the end of its first run (`landed`), its sentence's run (`typed`) and its Head view's
    (`done`), and the reruns it asked for (`asked`, each a `BackMsg`)."""

    sentence: str
    charts: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    landed: float = 0.0
    typed: float = 0.0
    done: float = 0.0
    asked: list = field(default_factory=list)

    def tokens(self) -> set[str]:
        """Every token label on the axes of its charts (the tokens its Head view shows), as the user reads them (a
        leading space's mark, ␣, left out)."""
        found: set[str] = set()
        for spec in self.charts:
            figure = json.loads(spec)
            for axis in [*figure.get("data", []), *figure.get("layout", {}).values()]:
                for name in ("x", "y", "ticktext"):
                    values = axis.get(name) if isinstance(axis, dict) else None
                    if isinstance(values, list):
                        found |= {label_text(v).strip().lstrip("␣") for v in values if isinstance(v, str)}
        return found


SIDEBAR = 1  # the first index of a delta path in the sidebar (0: the main area)


def widget_state(element) -> tuple[str, str, object, bool] | None:
    """(widget id, the `WidgetState` field, value, whether the server set it) that a browser sends for `element` on
    every rerun while it is drawn, as Chromium does from the element's first drawing: a value the server set
    (`set_value`), else the default (which a browser holding a value of its own for the widget keeps: `Session`);
    None for an element it sends nothing for until used (a button, a chart, an expander), or a picker with nothing
    picked."""
    kind = element.WhichOneof("type")
    widget = getattr(element, kind)
    if kind in ("selectbox", "radio"):
        if widget.set_value:
            return widget.id, "string_value", widget.raw_value, True
        return (widget.id, "string_value", widget.options[widget.default], False) if widget.HasField("default") \
            else None
    if kind in ("text_area", "text_input", "checkbox"):
        name = "bool_value" if kind == "checkbox" else "string_value"
        return widget.id, name, widget.value if widget.set_value else widget.default, widget.set_value
    if kind == "number_input":
        value = widget.value if widget.set_value else widget.default
        name, value = ("int_value", int(value)) if widget.data_type == widget.INT else ("double_value", value)
        return widget.id, name, value, widget.set_value
    return None


class Session:
    """One student's websocket session: the ids and hashes it learnt, its widgets' values, the large elements it
    received (by hash), and what its last run drew."""

    def __init__(self, socket, seen: Seen, url: str = "") -> None:
        self.socket, self.seen, self.url = socket, seen, url.rstrip("/")  # the server's address (the context's)
        self.box_id = ""  # the *Sentence* box's widget id
        self.pages: dict[str, str] = {}  # url path -> page script hash
        self.page = ""  # the page script hash the server ran last
        self.query = ""  # the address's query: the link's, kept while the student stays on its page
        self.widgets: dict[str, tuple[str, object, bool]] = {}  # id -> (field, value, in the sidebar), the last run's
        self.drawing: dict[str, tuple[str, object, bool]] = {}  # the same, of the run being read
        self.kept: dict[str, bytes] = {}  # hash -> a cacheable message received (`ref_hash` names it)
        self.references = 0  # messages received as a reference to one kept

    def request(self, *, page: str = "", widgets: dict[str, str] | None = None, query: str | None = None) -> BackMsg:
        """The rerun a browser asks for: of page hash `page` ("" for the landing page), its widgets' values with
        `widgets` {id: string} in place of theirs, the address's `query` (None: the one it has; a link's on landing)."""
        other_page = bool(page) and page != self.page
        if query is not None or other_page:  # another page: the address loses the link's query
            self.query = query or ""
        for widget_id, value in (widgets or {}).items():  # what the student typed is the browser's value from now on
            self.widgets[widget_id] = ("string_value", value, self.widgets.get(widget_id, ("", "", True))[2])
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string, rerun.page_script_hash = self.query, page
        states = {i: (name, value) for i, (name, value, sidebar) in self.widgets.items() if sidebar or not other_page}
        for widget_id, (name, value) in states.items():
            state = rerun.widget_states.widgets.add()
            state.id = widget_id
            setattr(state, name, value)
        rerun.cached_message_hashes.extend(self.kept)
        context = rerun.context_info
        context.timezone, context.timezone_offset, context.locale = "UTC", 0, "en-US"
        context.url, context.is_embedded, context.color_scheme = self.url + "/", False, "light"
        return msg

    async def run(self, *, page: str = "", widgets: dict[str, str] | None = None, query: str | None = None) -> None:
        """Ask for a rerun (`request`) and read its messages until a run finishes: the charts, texts and widgets are
        the last run's."""
        msg = self.request(page=page, widgets=widgets, query=query)
        self.seen.asked.append(msg)
        await self.socket.send(msg.SerializeToString())
        self.seen.charts, self.seen.texts, self.drawing = [], [], {}
        while True:
            data = await asyncio.wait_for(self.socket.recv(), RUN_TIMEOUT_S)
            got = ForwardMsg()
            got.ParseFromString(data)
            if got.WhichOneof("type") == "ref_hash":  # an element it was sent before: read from what it kept
                path, self.references = list(got.metadata.delta_path), self.references + 1
                got.ParseFromString(self.kept[got.ref_hash])
                got.metadata.ClearField("delta_path")
                got.metadata.delta_path.extend(path)
            elif got.metadata.cacheable:
                self.kept[got.hash] = data
            kind = got.WhichOneof("type")
            if kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in got.navigation.app_pages}
                self.page = got.navigation.page_script_hash
            elif kind == "delta" and got.delta.WhichOneof("type") == "new_element":
                self._read(got.delta.new_element, got.metadata.delta_path[0] == SIDEBAR)
            elif kind == "script_finished" and got.script_finished in FINISHED:
                self.widgets = self.drawing
                return

    def _read(self, element, sidebar: bool) -> None:
        kind = element.WhichOneof("type")
        if (state := widget_state(element)) is not None:
            widget_id, name, value, set_here = state
            held = self.widgets.get(widget_id)  # a widget drawn before keeps the browser's value, unless set here
            self.drawing[widget_id] = (name, value if set_here or held is None else held[1], sidebar)
        if kind == "text_area" and element.text_area.id.endswith(f"-{keys.TEXT}"):
            self.box_id = element.text_area.id
        elif kind == "plotly_chart":
            self.seen.charts.append(element.plotly_chart.spec)
        elif kind == "exception":
            self.seen.errors.append(f"{element.exception.type}: {element.exception.message}")
        elif kind == "alert":
            if element.alert.format == element.alert.ERROR:
                self.seen.errors.append(element.alert.body)
            self.seen.texts.append(element.alert.body)
        elif kind in ("markdown", "heading"):
            self.seen.texts.append(getattr(element, kind).body)


def connect(url: str):
    """A websocket to the Streamlit server at `url` (http://host:port), as a browser's tab opens one: an async context
    manager."""
    return websockets.connect(url.replace("http://", "ws://", 1).rstrip("/") + "/_stcore/stream", max_size=None,
                              subprotocols=["streamlit"])


async def student(url: str, sentence: str, start: float, page: str = "head_view", query: str = "") -> Seen:
    """One student: lands (on a link's `query`, e.g. "model=smollm2"), types `sentence`, opens `page`; what it saw
    (`Seen`), its times from `start`."""
    seen = Seen(sentence)
    async with connect(url) as socket:
        session = Session(socket, seen, url)
        await session.run(query=query)
        seen.landed = time.monotonic() - start
        if not session.box_id or page not in session.pages:
            seen.errors.append(f"the landing page drew no Sentence box or no link to {page}")
            return seen
        typed = {session.box_id: sentence}
        await session.run(page=session.page, widgets=typed)
        seen.typed = time.monotonic() - start
        await session.run(page=session.pages[page], widgets=typed)
        seen.done = time.monotonic() - start
    return seen


async def _class(url: str, sentences: list[str], query: str) -> list[Seen]:
    start = time.monotonic()
    return list(await asyncio.gather(*(student(url, s, start, query=query) for s in sentences)))


def class_of(url: str, sentences: list[str], query: str = "") -> list[Seen]:
    """Every student of `sentences` (one sentence each) at once on the server at `url`, each landing on the link's
    `query` (e.g. "model=smollm2"), in a new event loop on a thread of its own (the calling thread may run a loop
    already: the browser tests' sync playwright does)."""
    out: list[list[Seen]] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            out.append(asyncio.run(_class(url, sentences, query)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            failed.append(exc)
    worker = threading.Thread(target=run, name="mha-viz-class")
    worker.start()
    worker.join()
    if failed:
        raise failed[0]
    return out[0]


def marker_words(tokenizer, count: int) -> list[str]:
    """`count` distinct lower-case words that `tokenizer` reads as one token each (a student's own word, which its
    Head view must show as one token label and no other student's may)."""
    words = sorted({w.lstrip("Ġ▁") for w in tokenizer.get_vocab()})  # a byte-level or SentencePiece word's own mark
    words = [w for w in words if w.isascii() and w.isalpha() and w.islower() and 6 <= len(w) <= 9]
    # one token after a space, as in the sentence (a BPE vocabulary's bare pieces read otherwise there)
    ids = tokenizer([" " + w for w in words], add_special_tokens=False)["input_ids"]
    vocab = [w for w, i in zip(words, ids) if len(i) == 1]
    step = max(1, len(vocab) // count)
    words = vocab[::step][:count]
    if len(words) < count:
        raise ValueError(f"the tokenizer has {len(vocab)} such words, not {count}")
    return words


def sentence_of(word: str) -> str:
    return f"The teacher wrote {word} on the board."
