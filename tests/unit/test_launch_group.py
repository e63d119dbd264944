"""`mha-viz app --processes N` without starting it (issue 91; the deployment itself: tests/e2e/test_e2e_processes.py):
nginx's configuration names every app process, keeps a browser on one by its own cookie, passes websockets through
and writes nothing outside its folder (checked by nginx itself where it is installed); bad options are refused with
exit code 2 and one line."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest

from mha_viz import cli, launch, launch_group, settings
from tests.waiting import wait_until


def test_the_configuration_hands_new_browsers_round_and_keeps_each_on_its_cookies_process(tmp_path):
    ports = [40001, 40002, 40003]
    text = launch_group.config(ports, 8501, tmp_path)
    every = text[text.index("upstream every {"):].split("}", 1)[0].splitlines()[1:]
    assert [line.split()[1] for line in every if line.strip()] == [f"127.0.0.1:{p}" for p in ports]
    assert "hash" not in text  # the next process in turn, not a hash: a class splits evenly
    for port in ports:  # a cookie's process first, the others its backups
        block = [line for line in text[text.index(f"upstream pinned_{port} {{"):].split("}", 1)[0].splitlines()[1:]
                 if line.strip()]
        assert block[0].split()[1] == f"127.0.0.1:{port}" and "backup" not in block[0], block
        assert sorted(line.split()[1] for line in block[1:]) == [f"127.0.0.1:{p}" for p in ports if p != port]
        assert all(line.rstrip(";").endswith("backup") for line in block[1:]), block
        assert f"        {port} pinned_{port};" in text
    assert f"map $cookie_{launch_group.STUDENT} $process" in text and "proxy_pass http://$process;" in text
    assert "proxy_set_header Upgrade $http_upgrade;" in text and "proxy_buffering off;" in text
    assert "proxy_set_header Host $http_host;" in text  # the port kept: Streamlit checks the Origin against it
    assert "listen 127.0.0.1:8501;" in text and "listen 8501;" in launch_group.config([1], 8501, tmp_path, public=True)
    paths = [line.split()[1] for line in text.splitlines() if line.strip().startswith(
        ("pid", "error_log", "access_log", "client_body_temp_path", "proxy_temp_path"))]
    assert len(paths) == 5 and all(p.rstrip(";").startswith(str(tmp_path)) for p in paths), paths


def test_nginx_accepts_the_configuration(tmp_path):
    nginx = launch_group.nginx_binary()
    if nginx is None:
        pytest.skip("nginx is not installed (the e2e tier needs it: .ci/run installs it)")
    conf = tmp_path / "nginx.conf"
    conf.write_text(launch_group.config([40001, 40002], 18555, tmp_path))
    checked = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(conf)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


class _Answer(http.server.BaseHTTPRequestHandler):
    """A stand-in app process: answers every GET with its own port."""

    def do_GET(self):  # noqa: N802 - the name http.server calls
        body = str(self.server.server_address[1]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _get(url: str, cookie: str | None = None) -> tuple[str, str | None]:
    """(the port that answered, the cookie nginx set) for one request to `url`, with the STUDENT cookie `cookie`."""
    headers = {"Cookie": f"{launch_group.STUDENT}={cookie}"} if cookie is not None else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as answer:
        return answer.read().decode(), answer.headers.get("Set-Cookie")


def test_nginx_hands_new_browsers_round_keeps_each_on_its_process_and_passes_a_stopped_ones_on(tmp_path):
    """Through nginx itself, in front of three stand-in processes: six new browsers go to each process twice, in
    turn, and each is given a cookie naming the process that answered; a browser's cookie keeps it there; a cookie
    that names no process of the group is a new browser; and the browsers of a process that stopped answering are
    served by the others."""
    nginx = launch_group.nginx_binary()
    if nginx is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is not installed (.ci/run installs it)")
        pytest.skip("nginx is not installed (the e2e tier needs it: .ci/run installs it)")
    apps = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer) for _ in range(3)]
    ports = [app.server_address[1] for app in apps]
    for app in apps:
        threading.Thread(target=app.serve_forever, daemon=True).start()
    listen = launch.free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(launch_group.config(ports, listen, tmp_path))
    proxy = subprocess.Popen([nginx, "-p", str(tmp_path), "-c", str(conf)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{listen}/"
    try:
        assert wait_until(lambda: _listening(listen) or proxy.poll() is not None, 30)
        assert proxy.poll() is None, (tmp_path / "error.log").read_text()
        new = [_get(url) for _ in range(6)]
        answered = [int(port) for port, _ in new]
        assert sorted(answered) == sorted(ports * 2), answered  # each process twice
        assert answered[3:] == answered[:3], answered  # in turn
        for port, cookie in new:
            assert cookie is not None and cookie.startswith(f"{launch_group.STUDENT}={port};"), cookie
        for port in ports:  # a cookie keeps its browser on its process, and is not set again
            assert [_get(url, str(port)) for _ in range(3)] == [(str(port), None)] * 3
        port, cookie = _get(url, "12345")  # a process of no group of ours: a new browser, given a cookie of its own
        assert int(port) in ports and cookie.startswith(f"{launch_group.STUDENT}={port};"), cookie
        apps[0].shutdown()
        apps[0].server_close()
        for _ in range(3):  # the stopped process's browsers go to the others; the others' stay where they were
            assert int(_get(url, str(ports[0]))[0]) in ports[1:]
            assert _get(url, str(ports[1]))[0] == str(ports[1])
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)
        for app in apps[1:]:
            app.shutdown()
            app.server_close()


@pytest.mark.parametrize("argv, said", [(["app", "--processes", "0"], "--processes must be between 1 and 64"),
                                        (["--processes", "2", "--port", "70000"], "--port must be between")])
def test_bad_options_are_one_line_and_code_2(argv, said, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


# an app process stand-in: writes what it computes on (OMP_NUM_THREADS, and PyTorch's own count where asked), then
# waits to be stopped
APP = """import os, sys, time
count = __import__("torch").get_num_threads() if sys.argv[2] == "torch" else None
open(sys.argv[1] + ".tmp", "w").write(f"{os.environ.get('OMP_NUM_THREADS')} {count}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


@pytest.mark.parametrize("cpus, processes, users, expected", [
    (2, 2, {}, "1"),  # this project's machine: one thread a process, not two
    (8, 3, {}, "2"),
    (2, 3, {}, "1"),  # more processes than CPUs: one thread each all the same
    (8, 2, {"OMP_NUM_THREADS": "3"}, "3"),  # the user's own count, left alone
])
def test_the_app_processes_share_the_cpus_out(monkeypatch, tmp_path, capsys, cpus, processes, users, expected):
    """`mha-viz app --processes N` starts each app process with PyTorch's threads set to its share of the CPUs:
    N processes never start more threads than there are CPUs (each on as many threads as CPUs, a student's analysis
    cost twice the CPU for the same wall time: docs/speed.md). The first case reads PyTorch's own count in the
    process."""
    monkeypatch.setattr(settings, "machine_cpus", lambda: cpus)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for name, value in users.items():
        monkeypatch.setenv(name, value)
    read = "torch" if cpus == 2 and processes == 2 else "env"
    monkeypatch.setattr(launch, "command", lambda port, public: [sys.executable, "-c", APP, str(tmp_path / str(port)),
                                                                 read])
    monkeypatch.setattr(launch, "health", lambda url: "ok" if (tmp_path / url.rsplit(":", 1)[1]).exists() else "")
    monkeypatch.setattr(launch_group, "nginx_binary", lambda: sys.executable)  # refuses nginx's options, exits
    assert launch_group.run_group(processes, launch.free_port(), launch.app_env()) == 1
    assert "a process of the group exited" in capsys.readouterr().err
    said = [f.read_text().split() for f in tmp_path.iterdir() if f.name.isdigit()]
    assert len(said) == processes and all(env == expected for env, _ in said), said
    if read == "torch":
        assert all(count == expected for _, count in said), said
