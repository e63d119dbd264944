"""The bare twin of mha-viz's pages (benchmarks/pages.py, issue 59): a Streamlit app with no mha_viz,
with `st.navigation` at the top, a sidebar text area and, per page, the same number, sizes and kinds
of Plotly charts as the mha-viz page drew in the benchmark (random data). A Seed box on each page
redraws its charts with other data: the twin of an in-page choice.

Its pages are read on every run from the JSON file $BARE_TWIN_SPEC names (timeline.write_spec):
{"pages": [{"title", "section", "charts": [{"top", "width", "height", "traces": [{"type", "mode",
"z", "n", "w", "h"}]}]}]}; charts at the same height on the page share a row (st.columns). With
$MHA_VIZ_RUN_TRACE set it writes its runs as mha_viz.ui.run_trace does.

Run: `BARE_TWIN_SPEC=spec.json streamlit run benchmarks/bare_app.py` (pages.py does).
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import sys
import time

import numpy as np
import plotly.graph_objects as go
import streamlit as st

HEATMAPS = ("heatmap", "contour", "heatmapgl")
XY = ("scatter", "scattergl", "bar")


def spec() -> list[dict]:
    try:
        with open(os.environ["BARE_TWIN_SPEC"], encoding="utf-8") as f:
            return json.load(f)["pages"] or []
    except (KeyError, OSError, ValueError):
        return []


def png(rng: np.random.Generator, w: int, h: int) -> str:
    """A PNG data URI of w × h random pixels of 16 colours (at 512 × 512, about the app's size)."""
    from PIL import Image

    pixels = rng.integers(0, 16, size=(h, w), dtype=np.uint8) * 16
    out = io.BytesIO()
    Image.fromarray(np.stack([pixels, 255 - pixels, np.full_like(pixels, 200)], axis=-1)).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def figure(chart: dict, rng: np.random.Generator) -> go.Figure:
    fig = go.Figure()
    for t in chart["traces"]:
        if t["type"] == "image" and t.get("w") and t.get("h"):  # a PNG of as many pixels
            fig.add_trace(go.Image(source=png(rng, int(t["w"]), int(t["h"])), hoverinfo="skip"))
        elif t.get("z"):
            shape = t["z"] if len(t["z"]) == 2 else [t["z"][0], 1]
            fig.add_trace(go.Heatmap(z=rng.random(shape, dtype=np.float32), colorscale="Blues")
                          if t["type"] not in HEATMAPS[1:] else {"type": t["type"], "z": rng.random(shape)})
        else:
            n = max(int(t.get("n") or 0), 1)
            kind = t["type"] if t["type"] in XY else "scatter"
            trace = {"type": kind, "x": np.arange(n), "y": rng.random(n, dtype=np.float32)}
            if kind != "bar":
                trace["mode"] = t.get("mode") or "lines"
            fig.add_trace(trace)
    fig.update_layout(height=max(int(chart.get("height") or 450), 100), margin=dict(l=40, r=10, t=30, b=30))
    return fig


def rows(charts: list[dict]) -> list[list[dict]]:
    """Charts side by side (the same top on the page) in one row."""
    out: list[list[dict]] = []
    for c in charts:
        if out and abs(out[-1][0]["top"] - c["top"]) < 5:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def draw(page: dict) -> None:
    st.title(page["title"])
    seed = st.selectbox("Seed", list(range(10)), key="seed")
    rng = np.random.default_rng(seed)
    for i, row in enumerate(rows(page["charts"])):
        places = st.columns(len(row)) if len(row) > 1 else [st.container()]
        for j, (where, chart) in enumerate(zip(places, row)):
            where.plotly_chart(figure(chart, rng), key=f"chart-{i}-{j}")


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "page"


def main() -> None:
    st.set_page_config(page_title="bare twin", layout="wide")
    pages = spec() or [{"title": "Model facts", "section": "Model", "charts": []}]
    sections: dict[str, list] = {}
    for p in pages:
        sections.setdefault(p["section"], []).append(
            st.Page(lambda p=p: draw(p), title=p["title"], url_path=slug(p["title"])))
    page = st.navigation(sections, position="top")
    st.sidebar.text_area("Sentence", key="text")
    page.run()


if __name__ == "__main__":
    trace, start = os.environ.get("MHA_VIZ_RUN_TRACE"), time.time()
    try:
        main()
    finally:
        if trace:
            exc = sys.exc_info()[0]
            with open(trace, "a", encoding="utf-8") as f:
                f.write(f"{start:.6f} {time.time():.6f} bare - {exc.__name__ if exc else 'done'}\n")
