"""`mha-viz app --processes N` (issue 91): N app servers behind nginx, for a lecture hall. One Streamlit process
runs every session's script under one interpreter lock, so more cores serve more people only as more processes. A
browser must stay on one of them: its session, and the media (images) and uploads of that session, live in the
process that holds it. nginx hands each new browser to the next process in turn (round robin: a class arriving at
once splits evenly, and students behind one NAT spread too) and keeps its later requests there by a cookie of the
browser's own, STUDENT, set on its first request (the page itself) to the port of the process that answered, so
that every later request carries it. Hashing a random mark of each browser instead (until stop 114) split a class
of 300 by chance: one process spent 53 % of a class's CPU, the other 47 %. Should a browser's process stop
answering, nginx passes its requests to the others, its backups. (Streamlit's `_streamlit_xsrf`
cookie is not enough: it is set by whichever of the page's first requests, run at once, reaches a process first, and
a browser's cookie could change under its websocket, moving its session to another process, tried.) The processes
share one cookie secret, so that each accepts the xsrf cookie another made.

Each process loads its own models (the memory of one app process, times N: docs/deploying.md). The servers listen
on the loopback interface only; nginx listens on `port` (every interface with `public`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mha_viz import launch, settings

UPSTREAM_HEADER = "X-MHA-Viz-Upstream"  # which app process answered (its address), on every proxied response
STUDENT = "mha_viz_student"  # the cookie that keeps a browser on one process (`config`)
READY_S = 180  # how long the app processes may take to answer their health check at start


def nginx_binary() -> str | None:
    """nginx's path (PATH, then where Debian installs it, outside a user's PATH), or None where it is not installed."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def config(ports: list[int], listen: int, folder: Path, *, public: bool = False) -> str:
    """nginx's configuration: the app processes on `ports`, a new browser (no STUDENT cookie, or one naming no
    process of this group) handed to the next in turn and given the cookie, a browser with one kept on the process it
    names (the upstream `pinned_PORT`: that process, the others as backups), websockets passed through (Streamlit's
    session is one), no buffering, nothing written outside `folder` (pid, logs, temporary files: no root needed); the
    access log names each request's cookie and process, and each response says its process (UPSTREAM_HEADER)."""
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=0;" for p in ports)
    pinned = "\n".join(f"    upstream pinned_{p} {{\n        server 127.0.0.1:{p} max_fails=0;\n"
                       + "".join(f"        server 127.0.0.1:{o} backup;\n" for o in ports if o != p) + "    }"
                       for p in ports)
    routes = "\n".join(f"        {p} pinned_{p};" for p in ports)
    address = f"{listen}" if public else f"127.0.0.1:{listen}"
    temp = "\n".join(f"    {name}_temp_path {folder / name};" for name in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                         "scgi"))
    return f"""worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
daemon off;
events {{
    worker_connections 4096;
}}
http {{
    log_format student '$cookie_{STUDENT} $upstream_addr $status $request_method $uri';
    access_log {folder / "access.log"} student;
{temp}
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        '' close;
    }}
    # a browser's process: the one its cookie STUDENT names, else the next in turn (`every`)
    map $cookie_{STUDENT} $process {{
{routes}
        default every;
    }}
    # the port of the process that answered (the last one tried, where one did not answer)
    map $upstream_addr $answered {{
        "~:(?<port>[0-9]+)$" $port;
        default '';
    }}
    # a new browser's cookie: the process that answered its first request, the page itself
    map $process $new_student {{
        every "{STUDENT}=$answered; Path=/; SameSite=Lax; HttpOnly";
        default '';
    }}
    upstream every {{
{servers}
    }}
{pinned}
    server {{
        listen {address};
        client_max_body_size 60m;
        location / {{
            proxy_pass http://$process;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_read_timeout 1d;
            proxy_send_timeout 1d;
            proxy_buffering off;
            add_header {UPSTREAM_HEADER} $upstream_addr always;
            add_header Set-Cookie $new_student;
        }}
    }}
}}
"""



def _stop(procs: list[subprocess.Popen]) -> None:
    """Ask every process to stop (SIGTERM), then kill what has not after 10 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(ports: list[int], procs: list[subprocess.Popen], stopping: list[int]) -> str | None:
    """None once every app process answers its health check, or a signal asked to stop (`stopping` not empty); else
    why not (one exited, or READY_S passed)."""
    deadline = time.monotonic() + READY_S
    waiting = list(ports)
    while waiting and not stopping:
        for proc in procs:
            if proc.poll() is not None:
                return f"an app process exited with code {proc.returncode} while starting"
        waiting = [p for p in waiting if launch.health(f"http://127.0.0.1:{p}") != "ok"]
        if waiting and time.monotonic() > deadline:
            return f"the app processes on ports {waiting} did not answer within {READY_S} s"
        time.sleep(0.5)
    return None


def run_app_group(processes: int, port: int = launch.DEFAULT_PORT, public: bool = False, dtype: str = "auto",
                  lesson: str = "") -> int:
    """`launch.run_app` from `processes` app processes behind nginx (`run_group`); 2 for bad options."""
    why = launch.check_options(port, lesson, processes)
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    return run_group(processes, port, launch.app_env(public, dtype, lesson), public=public)


def run_group(processes: int, port: int, env: dict[str, str], *, public: bool = False) -> int:
    """Serve the app from `processes` app servers behind nginx on `port` until a signal stops it (SIGTERM, SIGINT,
    SIGHUP: every process then stops); returns 0, or 1 when it could not start (said on stderr)."""
    nginx = nginx_binary()
    if nginx is None:
        print("error: --processes needs nginx in front of the app processes (Debian: apt-get install nginx-light); "
              "see docs/deploying.md", file=sys.stderr)
        return 1
    ports = [launch.free_port() for _ in range(processes)]
    secret = secrets.token_hex(32)  # one cookie secret: a cookie one process made is valid in every other
    folder = Path(tempfile.mkdtemp(prefix="mha-viz-nginx-"))
    os.chmod(folder, 0o711)  # run as root, nginx's workers (nobody) write uploads' temporary files below it
    conf = folder / "nginx.conf"
    conf.write_text(config(ports, port, folder, public=public))
    shared = dict(env, STREAMLIT_SERVER_COOKIE_SECRET=secret)  # Streamlit takes it from the environment only
    shared.update(settings.thread_share(env, processes))  # the CPUs shared out: no more threads than CPUs
    procs: list[subprocess.Popen] = []
    stopping: list[int] = []

    def stop(signum, _frame) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        for p in ports:  # each started inside the try: one that cannot start stops those before it
            procs.append(subprocess.Popen(launch.command(p, False), env=shared, **launch.OWN_GROUP))
        apps = list(procs)
        why = _wait_ready(ports, apps, stopping)
        if why is None and not stopping:
            procs.append(subprocess.Popen([nginx, "-p", str(folder), "-c", str(conf)], env=env, **launch.OWN_GROUP))
            print(f"mha-viz: {processes} app processes (ports {', '.join(map(str, ports))}) behind nginx on "
                  f"http://localhost:{port}; Ctrl+C stops them all", flush=True)
        elif why is not None:
            print(f"error: {why}", file=sys.stderr)
            return 1
        while not stopping and all(p.poll() is None for p in procs):
            time.sleep(0.5)
        gone = [p for p in procs if p.poll() is not None]
        if gone and not stopping:
            print(f"error: a process of the group exited (code {gone[0].returncode}): stopping the others",
                  file=sys.stderr)
            return 1
        return 0
    finally:
        _stop(procs)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(folder, ignore_errors=True)
