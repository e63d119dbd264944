"""`mha-viz app --processes N` without starting it (issue 91; the deployment itself: tests/e2e/test_e2e_processes.py):
nginx's configuration names every app process, keeps a browser on one by its own cookie, passes websockets through
and writes nothing outside its folder (checked by nginx itself where it is installed); bad options are refused with
exit code 2 and one line."""

from __future__ import annotations

import subprocess

import pytest

from mha_viz import cli, launch_group


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
