"""The `mha-viz` command, as an installed mha-viz gives it: started from a folder that is not the
checkout (and holds a `models.py` that raises on import), it serves the app with the settings of
`.streamlit/config.toml`, and a browser gets the Model view of the default model."""

from __future__ import annotations

import sys
import tomllib

import pytest

from mha_viz import launch
from tests.helpers import ROOT

from .conftest import ARTIFACTS, open_app, start_server

pytestmark = pytest.mark.e2e
SCRIPT = ROOT / ".venv" / "bin" / "mha-viz"  # where `make install` puts the console script


def test_the_packaged_settings_are_the_checkouts():
    assert tomllib.loads(launch.CONFIG.read_text()) == tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())


def test_mha_viz_serves_the_app_from_any_folder(browser, tmp_path):
    (tmp_path / "models.py").write_text("raise RuntimeError('the user\\'s own models.py was imported')\n")

    def mha_viz(port: int) -> list[str]:  # the console script, else the same entry point as a module
        return [*([str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "mha_viz"]), "--port", str(port)]
    log = ARTIFACTS / "server-command.log"
    with start_server(log, command=mha_viz, cwd=tmp_path) as base_url:
        app = open_app(browser, base_url, "command")
        try:
            assert app.heading() == "Model view"
            app.assert_clean()
        finally:
            app.close()
    assert "mha-viz starting: open http://localhost:" in log.read_text(errors="replace")
