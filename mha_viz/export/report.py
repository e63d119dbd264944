"""A run as one self-contained HTML file: model facts, text, tokens, the layers × heads overview,
chosen heads' heatmaps and the metrics table, readable offline from a file.

Nothing is fetched: plotly.js travels inside the page gzip-compressed and base64-encoded
(about 1.9 MB instead of 4.8 MB), and the browser unpacks it with `DecompressionStream`. The
figures are Plotly JSON in `<script type="application/json">` blocks, with `<`, `>` and `&`
escaped so that no token or text can close the block; everything shown as HTML is escaped.
Its figures are drawn on Plotly's own template (`TEMPLATE`) wherever the report is built: in the app's server the
default template is Streamlit's, colour placeholders that only Streamlit's page turns into colours.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
from datetime import datetime, timezone
from functools import lru_cache
from importlib import resources
from numbers import Integral, Real

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs_version

from mha_viz.capture.run import AttentionRun
from mha_viz.drawing import heads as head_figures
from mha_viz.text.tokenize import count_text
from mha_viz.views.thumbnails import THUMB, thumbnails

POOL_ABOVE = 128  # longer inputs: a head as max-pooled blocks (head_figures.head_pooled), not every cell
GRID_THUMB = THUMB  # cells a side of each head in the overview, as in the app
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; color: #1b1f24; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
pre.text { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: .75rem;
           border-radius: 4px; }
.tokens { display: flex; flex-wrap: wrap; gap: .25rem; font-family: ui-monospace, monospace; }
.tok { border: 1px solid #c6dbef; border-radius: 3px; padding: 0 .3rem; white-space: pre; }
.tok.special { background: #deebf7; } .tok sub { color: #777; margin-right: .2rem; }
.plot { width: 100%; min-height: 120px; }
#status { color: #8a4b00; }
table.metrics { border-collapse: collapse; font-size: .8rem; }
table.metrics th, table.metrics td { border: 1px solid #ddd; padding: .15rem .4rem; text-align: right; }
table.metrics th { background: #f6f8fa; position: sticky; top: 0; }
table.metrics td.text { text-align: left; }
.scroll { max-height: 32rem; overflow: auto; }
footer { margin-top: 3rem; color: #666; font-size: .85rem; }
"""

# Unpack plotly.js, run it, then draw every figure; a browser without DecompressionStream (or
# with scripts off) gets a sentence instead of blank boxes.
_LOADER = """
(async () => {
  const status = document.getElementById("status");
  if (typeof DecompressionStream === "undefined") {
    status.textContent = "This browser cannot unpack the embedded plotting library "
      + "(it lacks DecompressionStream): open the report in a current Chrome, Edge, Firefox or Safari.";
    return;
  }
  const b64 = document.getElementById("plotly-gz").textContent.trim();
  const raw = atob(b64);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const code = await new Response(stream).text();
  const script = document.createElement("script");
  script.textContent = code;
  document.head.appendChild(script);
  for (const div of document.querySelectorAll("div.plot")) {
    const fig = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    await Plotly.newPlot(div, fig.data, fig.layout, {
      displaylogo: false, responsive: true,
      toImageButtonOptions: {format: "png", filename: div.dataset.name, scale: 2},
    });
  }
  status.remove();
})().catch((err) => {
  document.getElementById("status").textContent = "The figures could not be drawn: " + err;
});
"""


@lru_cache(maxsize=1)
def plotly_js() -> bytes:
    """The plotly.min.js of the installed `plotly` package (what its own offline HTML embeds)."""
    return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()


@lru_cache(maxsize=1)
def plotly_js_gzip_b64() -> str:
    """plotly.min.js gzip-compressed and base64-encoded, computed once per process (~0.3 s)."""
    return base64.b64encode(gzip.compress(plotly_js(), compresslevel=9, mtime=0)).decode("ascii")


def safe_json(text: str) -> str:
    """JSON text that can sit inside a <script> block: `<`, `>` and `&` become \\u escapes
    (outside strings JSON never uses them, so the value is unchanged)."""
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def _esc(value) -> str:
    return html.escape(str(value), quote=True)


def _cell(value) -> tuple[str, bool]:
    """A table value as text (numbers rounded to 4 significant digits), and whether it is text."""
    if isinstance(value, bool):
        return str(value), True
    if isinstance(value, Integral):
        return str(int(value)), False
    if isinstance(value, Real):
        v = float(value)
        return ("–" if math.isnan(v) else f"{v:.4g}"), False
    return str(value), True


def table_html(table: pd.DataFrame) -> str:
    """A DataFrame as an HTML table, every header and cell escaped, numbers rounded."""
    head = "".join(f"<th>{_esc(c)}</th>" for c in table.columns)
    rows = []
    for row in table.itertuples(index=False, name=None):
        cells = []
        for value in row:
            text, is_text = _cell(value)
            cells.append(f'<td class="text">{_esc(text)}</td>' if is_text else f"<td>{_esc(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="scroll"><table class="metrics"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _facts_html(run: AttentionRun, facts: dict | None) -> str:
    if facts is None:
        facts = {"layers captured": run.num_layers, "layers in the model": run.model_layers,
                 "heads per layer": run.num_heads, "key/value heads": run.num_kv_heads,
                 "causal": "yes" if run.is_causal else "no"}
        if getattr(run, "precision", ""):
            facts["precision"] = run.precision
    shown = {"model": run.model_name, **facts}
    items = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in shown.items())
    return f'<dl class="facts">{items}</dl>'


def _tokens_html(run: AttentionRun) -> str:
    spans = []
    for i, (tok, special) in enumerate(zip(run.tokens, run.special_mask)):
        cls = "tok special" if special else "tok"
        spans.append(f'<span class="{cls}"><sub>{i}</sub>{_esc(tok)}</span>')
    total = count_text(run.num_input_tokens, run.num_input_tokens_is_estimate)
    note = (f"<p>The first {run.n} of the text's {total} tokens (the rest was cut off).</p>"
            if run.truncated else "")
    if run.hidden is not None:
        note += f"<p>{_esc(run.hidden.label)}</p>"
    return note + f'<div class="tokens">{"".join(spans)}</div>'


TEMPLATE = "plotly"  # the template of every figure of a report: a notebook's default, the same in the app's server


def _figure_html(fig: go.Figure, key: str, name: str) -> str:
    """A div that the loader fills with `fig`, and the figure's JSON beside it, on `TEMPLATE`. The axes make
    room for their labels (automargin): the figures' own margins are narrow, which the app's
    charts widen for them but a plain page does not."""
    fig = go.Figure(fig).update_xaxes(automargin=True).update_yaxes(automargin=True)
    fig.layout.template = pio.templates[TEMPLATE]
    return (f'<div class="plot" id="{key}" data-figure="{key}-json" data-name="{_esc(name)}"></div>\n'
            f'<script type="application/json" id="{key}-json">{safe_json(fig.to_json())}</script>')


def head_figure(run: AttentionRun, layer: int, head: int) -> go.Figure:
    """One head's heatmap: every cell up to POOL_ABOVE tokens, max-pooled blocks beyond."""
    if run.n > POOL_ABOVE:
        return head_figures.head_pooled(run, layer, head, size=POOL_ABOVE)
    return head_figures.head_heatmap(run, layer, head)


def _checked_heads(run: AttentionRun, heads) -> list[tuple[int, int]]:
    """The (layer row, head) pairs, in order, without repeats; ValueError for one out of range."""
    out = []
    for layer, head in heads:
        layer, head = int(layer), int(head)
        if not (0 <= layer < run.num_layers and 0 <= head < run.num_heads):
            raise ValueError(f"no head ({layer}, {head}) in a run of {run.num_layers} layers × "
                             f"{run.num_heads} heads")
        if (layer, head) not in out:
            out.append((layer, head))
    return out


def html_report(run: AttentionRun, *, heads=((0, 0),), table: pd.DataFrame | None = None,
                facts: dict | None = None, title: str | None = None, overview: bool = True) -> str:
    """The report of `run` as one HTML page that needs no network.

    heads: (layer row, head) pairs to draw, layer rows as in `run.attentions`; table: e.g.
    `metrics.head_table(run)`; facts: name → value shown under the model name (default: the
    run's shape); overview: include the layers × heads grid. Raises ValueError for a head that
    the run does not have.
    """
    chosen = _checked_heads(run, heads)
    title = title or f"Attention of {run.model_name}"
    parts = [f"<h1>{_esc(title)}</h1>", _facts_html(run, facts),
             '<p id="status">Drawing the figures…</p>',
             "<noscript><p>The figures need JavaScript.</p></noscript>",
             "<h2>Text</h2>", f'<pre class="text">{_esc(run.text)}</pre>' if run.text else "<p>(no text)</p>",
             f"<h2>Tokens ({run.n})</h2>", _tokens_html(run)]
    if overview:
        grid = head_figures.grid_figure(thumbnails(run, GRID_THUMB), thumb=GRID_THUMB,  # a long run's: its scan's
                                        clickable=False, layer_ids=run.layer_ids)
        parts += ["<h2>Every head: layers × heads</h2>",
                  "<p>Each tile is one head, scaled to its own maximum.</p>",
                  _figure_html(grid, "fig-overview", "overview")]
    if chosen:
        parts.append("<h2>Chosen heads</h2>")
        for i, (layer, head) in enumerate(chosen):
            name = f"layer{run.layer_ids[layer]}-head{head}"
            parts.append(_figure_html(head_figure(run, layer, head), f"fig-head-{i}", name))
    if table is not None:
        parts += [f"<h2>Head metrics ({len(table)} rows)</h2>", table_html(table)]
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f"<footer>Generated by mha-viz on {_esc(when)}; figures drawn by plotly.js "
                 f"{_esc(get_plotlyjs_version())}, embedded in this file.</footer>")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        *parts,
        f'<script type="application/octet-stream" id="plotly-gz">{plotly_js_gzip_b64()}</script>',
        f"<script>{_LOADER}</script>", "</body>", "</html>", ""])


def report_bytes(run: AttentionRun, **options) -> bytes:
    """`html_report(run, **options)` as UTF-8 bytes, e.g. for a download button."""
    return html_report(run, **options).encode("utf-8")


def embedded_json(page: str, key: str) -> dict:
    """The figure JSON behind the div `key` of a report (for tests and tools)."""
    start = page.index(f'id="{key}-json">') + len(f'id="{key}-json">')
    return json.loads(page[start:page.index("</script>", start)])
