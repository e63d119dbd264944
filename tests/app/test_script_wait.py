"""The app tier's AppTest waits for its script on the runner's SHUTDOWN event (tests/app/script_wait.py), with
Streamlit's contract: it returns once the script has ended, and stops a script past its timeout with Streamlit's
error."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest, local_script_runner

from tests.app import script_wait

pytestmark = pytest.mark.app


def test_the_tier_waits_on_the_event():
    assert local_script_runner.require_widgets_deltas is script_wait.until_shutdown


def test_a_run_returns_with_what_its_script_drew():
    script = "import streamlit as st\nfor i in range(300):\n    st.write(f'line {i}')\n"
    at = AppTest.from_string(script).run(timeout=30)
    assert [m.value for m in at.markdown][-1] == "line 299"
    assert not at.exception


def test_a_script_past_its_timeout_is_stopped_with_streamlits_error():
    at = AppTest.from_string("import streamlit as st\nwhile True:\n    st.empty()\n")
    with pytest.raises(RuntimeError, match=r"timed out after 0\.5\(s\)"):
        at.run(timeout=0.5)
