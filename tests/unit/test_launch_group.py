"""`mha-viz app --processes N` without starting it (issue 91; the deployment itself: tests/e2e/test_e2e_processes.py):
nginx's configuration names every app process, keeps a browser on one by its own cookie, passes websockets through
and writes nothing outside its folder (checked by nginx itself where it is installed); bad options are refused with
exit code 2 and one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mha_viz import cli, launch, launch_group, settings


def test_the_configuration_hashes_each_browsers_own_cookie_over_every_process(tmp_path):
    text = launch_group.config([40001, 40002, 40003], 8501, tmp_path)
    assert text.count("server 127.0.0.1:4000") == 3
    assert "hash $student consistent;" in text and f"$cookie_{launch_group.STUDENT}" in text
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
