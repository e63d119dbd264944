"""`mha-viz` / `mha-viz app`: start the web app from anywhere, as `make run` does from a checkout.

The app is served with `streamlit run` on `mha_viz/ui/shell/serve.py` and the settings of
`mha_viz/streamlit.toml` (the same as the repository's `.streamlit/config.toml`, which Streamlit
only reads from the folder it starts in) given as command-line flags, so that an installed
mha-viz runs with them from any folder.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import tomllib
import urllib.request
from pathlib import Path

from mha_viz import settings
from mha_viz.export import lesson as lessons

SCRIPT = Path(__file__).resolve().parent / "ui" / "shell" / "serve.py"
CONFIG = Path(__file__).resolve().parent / "streamlit.toml"
DEFAULT_PORT = 8501


def flags(port: int, public: bool) -> list[str]:
    """Streamlit's flags: every setting of CONFIG, the port, and the address (every interface in
    public mode, for a server behind a proxy; else this machine only)."""
    out = []
    for section, values in tomllib.loads(CONFIG.read_text()).items():
        for name, value in values.items():
            out += [f"--{section}.{name}", str(value).lower() if isinstance(value, bool) else str(value)]
    return out + ["--server.port", str(port), "--server.address", "0.0.0.0" if public else "127.0.0.1"]


def command(port: int = DEFAULT_PORT, public: bool = False) -> list[str]:
    """The `streamlit run` command line that serves the app."""
    return [sys.executable, "-m", "streamlit", "run", str(SCRIPT), *flags(port, public)]


def free_port() -> int:
    """A TCP port of the loopback interface that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(base_url: str) -> str:
    """The server's health endpoint's answer ('ok' once the app serves), or the error instead."""
    try:
        with urllib.request.urlopen(base_url + "/_stcore/health", timeout=5) as r:
            return r.read().decode().strip()
    except OSError as exc:
        return f"unreachable: {exc}"


# a child process started outside the terminal's process group (POSIX), which a Ctrl+C then does not reach: it stops
# when its parent passes a signal on, once
OWN_GROUP = {"start_new_session": True} if os.name == "posix" else {}


def serve(argv: list[str], env: dict[str, str]) -> int:
    """Run `argv` until it exits and return its exit code, passing on the signals that stop this process: a
    service manager's SIGTERM, a closed terminal's SIGHUP (as a SIGTERM: Streamlit stops cleanly on that), a
    SIGQUIT, and SIGINT. Otherwise a `kill` of `mha-viz` would leave its server running. The server has a
    process group of its own (`OWN_GROUP`), so a terminal's Ctrl+C reaches it once, passed on from here: reaching it
    twice (the terminal's and this one's), Streamlit's server printed a KeyboardInterrupt traceback as it stopped."""
    proc = subprocess.Popen(argv, env=env, **OWN_GROUP)
    passed_on = {signal.SIGTERM: signal.SIGTERM}
    if hasattr(signal, "SIGHUP"):  # POSIX (Windows sends a child none of the others)
        passed_on |= {signal.SIGINT: signal.SIGINT, signal.SIGHUP: signal.SIGTERM, signal.SIGQUIT: signal.SIGQUIT}
    previous = {}
    if threading.current_thread() is threading.main_thread():  # where Python lets a handler be set
        previous = {sig: signal.signal(sig, lambda signum, _frame: proc.send_signal(passed_on[signum]))
                    for sig in passed_on}
    try:
        return proc.wait()
    except KeyboardInterrupt:  # Windows: Ctrl+C reached the server too (one console)
        proc.wait()
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check_options(port: int, lesson: str = "", processes: int = 1) -> str | None:
    """Why the app's options cannot be served (said on stderr, exit code 2), or None."""
    if not 1 <= port <= 65535:
        return f"--port must be between 1 and 65535, not {port}"
    if not 1 <= processes <= 64:
        return f"--processes must be between 1 and 64, not {processes}"
    if lesson and lesson not in lessons.bundled() and not Path(lesson).is_file():
        return f"--lesson {lesson} is neither a file nor a bundled lesson ({', '.join(lessons.bundled())})"
    return None


def app_env(public: bool = False, dtype: str = "auto", lesson: str = "") -> dict[str, str]:
    """The app process's environment: this one's, with OpenMP's spin bounded and NumPy's arrays on ordinary pages
    (`settings.process_env`), MHA_VIZ_PUBLIC=1 where `public`, MHA_VIZ_DTYPE where `dtype` is not "auto",
    MHA_VIZ_LESSON where `lesson`."""
    return dict(os.environ, **settings.process_env(os.environ), **({"MHA_VIZ_PUBLIC": "1"} if public else {}),
                **({"MHA_VIZ_DTYPE": dtype} if dtype != "auto" else {}),
                **({"MHA_VIZ_LESSON": str(Path(lesson).resolve()) if Path(lesson).is_file() else lesson}
                   if lesson else {}))


def run_app(port: int = DEFAULT_PORT, public: bool = False, dtype: str = "auto", lesson: str = "") -> int:
    """Serve the app until Ctrl+C or a signal to stop (`serve`); returns Streamlit's exit code. `public` sets
    MHA_VIZ_PUBLIC=1 (only the listed models, a capped token limit: docs/deploying.md); `dtype` other than "auto"
    sets MHA_VIZ_DTYPE, the sidebar's default *Precision*; `lesson` (a lesson file or a bundled
    lesson's name) sets MHA_VIZ_LESSON, the lesson every session opens on. (Several app processes behind nginx:
    `launch_group.run_app_group`.)"""
    why = check_options(port, lesson)
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    where = f"http://localhost:{port}" + (" (public mode, every interface)" if public else "")
    print(f"mha-viz starting: open {where} in your browser (Ctrl+C stops it); it answers once its "
          "libraries and the default model are loaded (about 10 s)", flush=True)
    return serve(command(port, public), app_env(public, dtype, lesson))
