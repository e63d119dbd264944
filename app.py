"""mha-viz: see what every attention head of a transformer does.

The frame and router: page config, the shared sidebar (model, device, text), then the chosen
view. Run with `make run` or `streamlit run app.py`.
"""

import logging

import streamlit as st

from mha_viz.ui import state

_log = logging.getLogger("mha_viz")
if not _log.handlers:  # once per server: model loads and failures go to the server's log
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    _log.addHandler(_handler)
    _log.setLevel(logging.INFO)

st.set_page_config(page_title="mha-viz: attention heads", page_icon="🔎", layout="wide")

pages = [
    st.Page("mha_viz/ui/pages/model_view.py", title="Model view", icon=":material/grid_view:", default=True),
    st.Page("mha_viz/ui/pages/head_view.py", title="Head view", icon=":material/zoom_in:"),
    st.Page("mha_viz/ui/pages/head_metrics.py", title="Head metrics", icon=":material/leaderboard:"),
    st.Page("mha_viz/ui/pages/similarity.py", title="Head similarity", icon=":material/hub:"),
    st.Page("mha_viz/ui/pages/compare_heads.py", title="Compare heads", icon=":material/compare:"),
    st.Page("mha_viz/ui/pages/across_layers.py", title="Across layers", icon=":material/stacked_line_chart:"),
    st.Page("mha_viz/ui/pages/teaching.py", title="Teaching: step by step", icon=":material/school:"),
    st.Page("mha_viz/ui/pages/ablation.py", title="Switch heads off", icon=":material/toggle_off:"),
    st.Page("mha_viz/ui/pages/model_facts.py", title="Model facts", icon=":material/info:"),
]
page = st.navigation(pages)
st.session_state["_current"] = state.sidebar()
try:
    page.run()
except Exception as exc:  # noqa: BLE001 - a view that fails shows a message, never a traceback
    logging.getLogger("mha_viz.ui").exception("view failed")
    st.error(state.plain(f"This view could not be drawn ({type(exc).__name__}: {str(exc)[:200]}). ")
             + "Your text and choices are kept: try another input or view.")
