"""mha-viz: see what every attention head of a transformer does.

The frame and router: page config, the shared sidebar (model, device, text), then the chosen
view. Run with `make run` or `streamlit run app.py`.
"""

import streamlit as st

from mha_viz.ui import state

st.set_page_config(page_title="mha-viz: attention heads", page_icon="🔍", layout="wide")

pages = [
    st.Page("mha_viz/ui/pages/model_view.py", title="Model view", icon="🧩", default=True),
    st.Page("mha_viz/ui/pages/head_view.py", title="Head view", icon="🔎"),
    st.Page("mha_viz/ui/pages/model_facts.py", title="Model facts", icon="📋"),
]
page = st.navigation(pages)
st.session_state["_current"] = state.sidebar()
page.run()
