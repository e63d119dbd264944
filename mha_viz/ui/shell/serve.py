"""The script the `mha-viz` command serves (`streamlit run` on this file): the app of
`mha_viz.ui.shell.main` from an installed package, as the repository's `app.py` serves it from a
checkout. Streamlit finds the `st.App` below in this file's source."""

import streamlit as st

from mha_viz.ui.shell.main import main
from mha_viz.ui.shell.preload import lifespan

if __name__ != "__main__":  # the server's import: serve the app
    app = st.App(__file__, lifespan=lifespan)
else:  # a session's run of the script
    main()
