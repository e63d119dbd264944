"""What a notebook reproduces: one view of the app (`NotebookView`: the page, the model as it was given,
the text, the sidebar's options, the chosen head and the page's own options), and how its values are
written into a notebook's cells (`literal` for code, `markdown_text` for prose), so that no text a user
typed can break a cell or inject into it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

Cell = tuple[str, str]  # a notebook cell: ("markdown" | "code", source)
PLAIN = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class NotebookView:
    """One view of the app, as a notebook reproduces it (`mha_viz.view_notebook`).

    page: the page's id (its URL path: "head_view", "model_view", "head_metrics", "ablation", "prediction",
    "teaching", …). model: as the user gave it, a bundled name, a hub id or a folder. layer: a row of the
    run (the model's layer number is `run.layer_ids[layer]`); head: a head of that layer. hide: the
    sidebar's *Hide tokens* ("special", "first", "template": a chat template's own tokens). chat: the messages of
    a chat (the sidebar's *Input*: Chat), rendered with the model's template in the notebook. contributions: *Show
    attention as* contributions.
    options: what the page itself chose (its detail level, metric, texts, heads switched off…): plain
    values, lists and dicts of them only.
    """

    page: str
    model: str
    text: str
    title: str = ""
    device: str = "auto"
    dtype: str = "auto"
    local_attention: bool = False
    max_tokens: int = 512
    layers: tuple[int, ...] | None = None
    hide: tuple[str, ...] = ()
    contributions: bool = False
    layer: int = 0
    head: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    chat: tuple[str, str, str] | None = None  # a chat's (user, system, reply): TEXT is them rendered by the template

    def option(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)


def literal(value: Any) -> str:
    """`value` as Python source that evaluates to it: strings through `repr` (quotes, backslashes,
    newlines and triple quotes all survive), numbers, booleans, None, and lists, tuples and dicts of
    them. Anything else is refused: a notebook never carries an object's own `repr`."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        return repr(float(value)) if value == value and abs(value) != float("inf") else f"float({str(value)!r})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if hasattr(value, "item") and not hasattr(value, "__len__"):  # a numpy scalar
        return literal(value.item())
    raise TypeError(f"a notebook cell cannot carry a {type(value).__name__}")


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#|~$])")


def markdown_text(text: str) -> str:
    """`text` as literal prose in a Markdown cell: HTML escaped, every Markdown mark (and `$`, which
    Jupyter reads as a formula) backslash-escaped, on one line."""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def md(text: str) -> Cell:
    return ("markdown", text)


def code(text: str) -> Cell:
    return ("code", text.strip("\n"))


def main_figure(title: str, source: str) -> Callable[[NotebookView], list[Cell]]:
    """A page's notebook recipe that draws its main figure from the same run (`source`), without the
    page's own options beyond the head."""
    def cells(v: NotebookView) -> list[Cell]:
        return [md(f"## {title}\n\nThe page's main figure from the same run; the page's own options beyond the "
                   "head are not carried over."), code(source)]
    return cells
