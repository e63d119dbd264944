"""Import, once per server and before any session draws, every library a page uses lazily.

Streamlit runs each browser session in a thread of one process. On a server that has just
started, the first sessions import their libraries at the same moment, and some libraries look
at `sys.modules` instead of importing: Plotly asks `get_module("pandas", should_load=False)`
(and numpy, PIL.Image) each time it validates a trace or writes a figure to JSON. A module
enters `sys.modules` before its body runs, so while one session imports pandas (the metrics and
teaching views do), another session building a heatmap finds the half-made module and fails
with *AttributeError: partially initialized module 'pandas' has no attribute 'Series'*.
Python's own import locks only protect `import` statements, not such look-ups.

`warm()`, which `mha_viz.ui.shell.main.main` calls before anything is drawn (each session's run of
app.py), imports everything the pages need and, where a library sets itself up on first use,
exercises it once with tiny inputs.
It holds a lock: the first session does the work, every other session waits for it, and afterwards a
call is one flag check. `warm()` never loads a model (models load once per server in
`mha_viz.budget.model_cache`). (The `import` statements that app.py runs before it are safe: a session
importing a module another session is importing waits for it to finish.)

Call `warm()` from the script or the server, never while a module is being imported: a session
holding an import lock while it waits for this lock could deadlock with the session doing the work.

Streamlit collects garbage after every run of the script (`gc.collect(2)`, its `runner.postScriptGC`), in the
script's thread and holding the interpreter's lock: with the libraries imported that walked about half a million
objects, 0.5–2 s after every click during which no message left the server. `warm()` ends with `heap.settle()`: the
objects alive then (the libraries', which live as long as the process) are left out of every later collection,
which then walks only what the sessions made since. With a class on the server even that was a quarter of its busy
time (every session's objects, three times a student), so the app's config turns the collection after each run off
(`postScriptGC = false`); Python's own collector runs as objects pile up, and skips the settled ones too.

`lifespan`, the server's start (app.py's `st.App`), runs `warm()` and loads the default model
into the app's model cache before the server answers its first request, health check included:
no session of a new server ever pays for them (issue 20). The script's own `warm()` is then a
flag check, and still the guarantee where nothing ran `lifespan` (AppTest).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import pkgutil
import sys
import threading
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable

from mha_viz.budget import heap

log = logging.getLogger("mha_viz.preload")

_lock = threading.Lock()
_done = False
timings: dict[str, float] = {}  # seconds per step of the first warm(), for the log and tests
failures: dict[str, str] = {}  # step -> error, for steps that failed (logged; the app carries on)

# Our own modules are all imported, except scripts (they run when imported).
# not for the app: a training script, the command line (runs on import), and the Ray engine
# (the app never imports Ray unless the Ray engine is chosen)
_SKIP_PREFIXES = ("mha_viz_models.train_", "mha_viz.__main__", "mha_viz.cli", "mha_viz.corpus.ray_engine",
                  "mha_viz.ui.shell.serve")


def warm() -> None:
    """Import everything the pages use, once per process; other callers wait until it is done."""
    global _done
    if _done:
        return
    with _lock:
        if _done:  # done by another session while this one waited
            return
        start = time.perf_counter()
        for name, step in _STEPS:
            t0 = time.perf_counter()
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - a missing optional library must not stop the app
                failures[name] = f"{type(exc).__name__}: {exc}"
                log.warning("preload step %s failed: %s", name, failures[name], exc_info=True)
            timings[name] = time.perf_counter() - t0
        heap.settle()  # what is alive now stays for the process (modules, their tables): no later collection
        # walks it (Streamlit's after every run included)
        _done = True
        total = time.perf_counter() - start
        log.info("preloaded the pages' libraries in %.1f s (%s)", total,
                 ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))


def done() -> bool:
    return _done


@asynccontextmanager
async def lifespan(_app) -> AsyncIterator[None]:
    """The server's start and stop (`st.App(..., lifespan=...)`): until this yields, the server
    serves nothing. A thread does the work, leaving the server's event loop free."""
    await asyncio.to_thread(_server_start)
    yield


def _server_start() -> None:
    start = time.perf_counter()
    without_triton_on_cpu()
    warm()
    _server_lesson()
    _default_model()
    log.info("server ready in %.1f s", time.perf_counter() - start)


def without_triton_on_cpu() -> None:
    """On a server with no GPU, Triton (installed beside the app for the tests' kernel interpreter) is made
    unimportable before anything imports it: torch's compiler imports it whenever it is installed, though no CPU run
    uses it, and its bindings then print a leak report of some 30 lines as the server stops, which reads as a crash
    (`make run`, then Ctrl+C). The server's alone (`lifespan`): a test process keeps Triton for its interpreter."""
    if "triton" in sys.modules:
        return
    import torch

    if not torch.cuda.is_available():
        sys.modules["triton"] = None  # `import triton` raises ImportError; find_spec finds none


def _server_lesson() -> None:
    """MHA_VIZ_LESSON read at the start: a lesson that cannot be opened is in the log before anyone
    arrives (`resources.server_lesson` logs why), and in a workshop the default model is its first."""
    from mha_viz.ui.kit import resources

    lesson, _ = resources.server_lesson()
    if lesson is not None:
        log.info("lesson %r: %d steps on %s", lesson.title, len(lesson.steps), ", ".join(lesson.models))


def _default_model() -> None:
    """The model a new session opens with (the picker's first option, device auto, the model's
    own attention), loaded into the app's model cache, when it is a bundled one (a hub id could
    go to the network, at every start), and run once (PyTorch sets itself up on a first pass)."""
    import mha_viz
    import mha_viz_models
    from mha_viz.ui.kit import resources
    from mha_viz.ui.shell import sidebar

    spec = sidebar.model_options()[0]
    if spec not in mha_viz_models.BUNDLED:
        return
    try:
        # the key `resources.load_model` asks for
        model = resources.model_cache().get(spec, sidebar.DEVICES[0], False, dtype=sidebar.default_precision())
        mha_viz.analyze(model, sidebar.DEFAULT_TEXT)
    except Exception:  # noqa: BLE001 - the first session loads it instead, and shows any error
        log.warning("preloading the default model %s failed", spec, exc_info=True)


# -- the steps ---------------------------------------------------------------------------------
def _numeric() -> None:
    import numpy as np
    import pandas as pd
    import pyarrow  # noqa: F401 - pandas and Streamlit's Arrow conversion

    df = pd.DataFrame({"a": np.arange(2, dtype=np.float32), "b": ["x", "y"]})
    df.to_csv()  # st.download_button of a table


def _images() -> None:
    import io

    import numpy as np
    from PIL import Image, PngImagePlugin  # noqa: F401 - Plotly also peeks at PIL.Image

    Image.fromarray(np.zeros((2, 2, 3), dtype=np.uint8)).save(io.BytesIO(), format="PNG")


def _plotly() -> None:
    import numpy as np
    import pandas as pd
    import plotly.colors  # noqa: F401 - colour scales are validated through it
    import plotly.graph_objects as go
    import plotly.io
    import plotly.tools

    z = np.eye(2, dtype=np.float32)
    fig = go.Figure(go.Heatmap(z=z, x=["a", "b"], y=["a", "b"], hovertemplate="%{z}", zmin=0, zmax=1,
                               colorscale=[[0, "#ffffff"], [1, "#08306b"]], colorbar={"title": "p"}))
    fig.add_trace(go.Heatmap(z=z, colorscale="RdBu", zmid=0))
    fig.add_trace(go.Scatter(x=[0, 1], y=[1, 0], mode="lines+markers", text=["a", "b"],
                             marker={"color": [0, 1], "colorscale": "Viridis", "colorbar": {"title": "c"}}))
    # plotly reads pandas input through narwhals
    fig.add_trace(go.Bar(x=pd.Series(["a", "b"]), y=pd.Series([1.0, 2.0]), marker={"color": "#4c78a8"}))
    fig.add_trace(go.Image(source="data:image/png;base64,"))
    fig.add_shape(type="rect", x0=0, x1=1, y0=0, y1=1, line={"color": "red", "width": 1})
    fig.update_layout(title="t", margin={"l": 0, "r": 0, "t": 0, "b": 0}, legend={"orientation": "h"},
                      xaxis={"tickvals": [0, 1], "title": "x", "tickfont": {"size": 9}},
                      yaxis={"autorange": "reversed", "title": "y", "tickfont": {"size": 9}})
    # what st.plotly_chart does with a figure
    plotly.io.to_json(plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True),
                      validate=False)


def _streamlit() -> None:
    import narwhals.stable.v1 as nw
    import pandas as pd
    import streamlit.emojis  # noqa: F401 - page and widget icons are checked against these
    import streamlit.material_icon_names  # noqa: F401
    from streamlit import dataframe_util

    df = pd.DataFrame({"layer": [0, 1], "score": [0.5, 0.25], "pattern": ["prev", "self"]})
    nw.from_native(df)
    dataframe_util.determine_data_format(df)
    dataframe_util.convert_anything_to_arrow_bytes(df)  # st.dataframe, st.table, st.data_editor
    dataframe_util.convert_anything_to_pandas_df(df.to_dict("list"))
    import streamlit.elements.lib.streamlit_plotly_theme  # noqa: F401 - st.plotly_chart's theme
    from streamlit.dataframe import lazy_df_source  # st.dataframe decides here whether to page

    lazy_df_source.resolve_lazy_source(df, None, is_selection_activated=False)


def _scipy() -> None:
    import numpy as np
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow
    from scipy.spatial.distance import squareform

    d = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.5], [2.0, 1.5, 0.0]])
    condensed = squareform(d, checks=False)
    leaves_list(optimal_leaf_ordering(linkage(condensed, "average"), condensed))
    maximum_flow(csr_matrix(np.array([[0, 2], [0, 0]], dtype=np.int32)), 0, 1)


def _transformers() -> None:
    import safetensors.torch  # noqa: F401
    import tokenizers  # noqa: F401
    from tokenizers import Tokenizer, pre_tokenizers, processors  # noqa: F401
    from tokenizers.models import WordLevel  # noqa: F401
    from transformers import (  # noqa: F401 - lazy attributes of transformers: each imports its module
        AutoConfig,
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForMaskedLM,
        AutoTokenizer,
        PreTrainedModel,
        PreTrainedTokenizerFast,
    )
    from transformers.models.auto import modeling_auto, tokenization_auto  # noqa: F401

    # the families the bundled models and the suggested hub ids use (BERT, GPT-2, Llama)
    for family in ("bert", "gpt2", "llama"):
        for part in ("configuration", "modeling", "tokenization"):
            name = f"transformers.models.{family}.{part}_{family}"
            if importlib.util.find_spec(name) is not None:
                importlib.import_module(name)
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    for name in ("BertTokenizer", "GPT2Tokenizer", "LlamaTokenizer"):  # AutoTokenizer's look-up
        tokenizer_class_from_name(name)


def _gguf() -> None:
    # smollm2 is a GGUF file, converted by transformers on its first load
    if importlib.util.find_spec("gguf") is None:
        return
    import gguf  # noqa: F401
    import transformers.modeling_gguf_pytorch_utils  # noqa: F401


def _ours() -> None:
    import mha_viz
    import mha_viz_models

    for package in (mha_viz_models, mha_viz):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.startswith(_SKIP_PREFIXES):
                importlib.import_module(info.name)


def compile_loops() -> None:
    """Every variant of the compiled loops that a page calls, compiled or loaded from Numba's cache; one process at a
    time (`compiled.compiling`): those that wait load what the first wrote."""
    from mha_viz import compiled
    from mha_viz.capture import pool_kernel  # Numba compiles the loops on first use
    from mha_viz.metrics import js_kernels, row_kernels

    with compiled.compiling():
        js_kernels.compile_now()
        row_kernels.compile_now()
        pool_kernel.compile_now()


_STEPS: tuple[tuple[str, Callable[[], None]], ...] = (
    ("numpy/pandas", _numeric),
    ("PIL", _images),
    ("plotly", _plotly),
    ("streamlit", _streamlit),
    ("scipy", _scipy),
    ("transformers", _transformers),
    ("gguf", _gguf),
    ("mha_viz", _ours),
    ("numba", compile_loops),
)
