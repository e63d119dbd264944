"""mha-viz: see what every attention head of a transformer does (`make run`, `streamlit run app.py`).

The app is `mha_viz.ui.shell.main`; this script is what Streamlit serves from a checkout. Streamlit
finds the `st.App` below in the script's own source; each browser session runs the script as
`__main__` and draws with `main()`.
"""

import streamlit as st

from mha_viz.ui.shell import preload
from mha_viz.ui.shell.main import main

if __name__ == "__main__":  # a session's run of the script
    main()
else:  # the server's import (`streamlit run` serves `app`, found in this file's source)
    app = st.App(__file__, lifespan=preload.lifespan)
