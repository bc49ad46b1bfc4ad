"""``python -m sine.fetch`` through a real nginx ``proxy_cache``: the second fetch says HIT.

nginx adds no ``X-Cache`` (Squid's header, the only one ``sine.fetch`` used to read), so it
printed ``cache=-`` on every document.  Here an unmodified nginx sits in front of
``python -m sine.server`` as a caching reverse proxy and reports its decision the usual way,
``add_header X-Cache-Status $upstream_cache_status``.  The command line, run twice on the
same document in one session, must print ``cache=MISS`` and then ``cache=HIT``, both documents
must verify, and nginx's own access log (which records ``$upstream_cache_status`` too) must
agree line for line with what the client printed.  nginx runs with its own configuration in a
temporary prefix and is always stopped at teardown; a missing nginx fails the test (never a
skip).
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sine.algorithms import SigAlg, SigningKey
from sine.site import STORE_DIR, sign_site

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

STARTUP_TIMEOUT = 20.0
DOC = bytes((i * 7 + i // 251) % 256 for i in range(5000))

NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 64; }}
http {{
    log_format cache "$request_uri $upstream_cache_status";
    access_log {prefix}/access.log cache;
    client_body_temp_path {prefix}/tmp_body;
    proxy_temp_path {prefix}/tmp_proxy;
    fastcgi_temp_path {prefix}/tmp_fastcgi;
    uwsgi_temp_path {prefix}/tmp_uwsgi;
    scgi_temp_path {prefix}/tmp_scgi;
    proxy_cache_path {prefix}/cache keys_zone=sine:1m;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{origin_port};
            proxy_cache sine;
            add_header X-Cache-Status $upstream_cache_status always;
        }}
    }}
}}
"""


def _free_port() -> int:
    """A port that was free a moment ago (nginx and the origin cannot be told to pick one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _logs(*paths: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in paths if p.exists())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process started in its own session, and everything it started."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def _start(cmd: list[str], port: int, what: str, log: Path, *more_logs: Path
           ) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own session (output to ``log``) and wait until it listens."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _stop(proc)
            pytest.fail(f"{what} exited with {proc.returncode}: {_logs(log, *more_logs)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    _stop(proc)
    pytest.fail(f"{what} did not listen on {port} within {STARTUP_TIMEOUT} s: "
                f"{_logs(log, *more_logs)}")


@pytest.fixture(scope="module")
def nginx_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """``(nginx URL, the origin's public key file, nginx's access log)``."""
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists()
                                    else None)
    if exe is None:
        pytest.fail("nginx is required for this interop test but is not installed "
                    "(apt-get install nginx-light)")
    base = tmp_path_factory.mktemp("sine-nginx")
    root, prefix = base / "www", base / "nginx"
    root.mkdir()
    prefix.mkdir()
    (root / "doc.bin").write_bytes(DOC)
    (root / "index.html").write_bytes(b'<html><a href="doc.bin">doc</a></html>\n')
    sign_site(root, SigningKey.generate(SigAlg.ECDSA_P256_SHA256), time.time())
    origin_port, nginx_port = _free_port(), _free_port()
    # as root, nginx's worker would switch to a user that cannot read a private temp directory
    user = ""
    if os.geteuid() == 0:
        user = (f"user {pwd.getpwuid(os.geteuid()).pw_name} "
                f"{grp.getgrgid(os.getegid()).gr_name};\n")
    conf = prefix / "nginx.conf"
    conf.write_text(NGINX_CONF.format(user=user, prefix=prefix, port=nginx_port,
                                      origin_port=origin_port))
    procs = []
    try:
        procs.append(_start([sys.executable, "-m", "sine.server", str(root), "--no-tls",
                             "--port", str(origin_port)], origin_port, "python -m sine.server",
                            base / "origin.log"))
        procs.append(_start([exe, "-p", str(prefix), "-c", str(conf), "-e",
                             str(prefix / "error.log")], nginx_port, "nginx",
                            prefix / "stdout.log", prefix / "error.log"))
        yield f"http://127.0.0.1:{nginx_port}", root / STORE_DIR / "public.pem", \
            prefix / "access.log"
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _fetch(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "sine.fetch", *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()


def _cache_log(log: Path, uri: str, count: int) -> list[str]:
    """nginx's ``$upstream_cache_status`` for the first ``count`` requests of ``uri``."""
    deadline = time.monotonic() + 5
    while True:
        rows = [line.split()[1] for line in log.read_text().splitlines()
                if line.split()[0] == uri]
        if len(rows) >= count or time.monotonic() > deadline:
            return rows


@pytest.mark.parametrize("mode,path", [("sine", "/doc.bin"), ("http", "/index.html")])
def test_second_fetch_through_nginx_prints_cache_hit(
        nginx_cache: tuple[str, Path, Path], mode: str, path: str) -> None:
    url, key, log = nginx_cache
    lines = _fetch(f"{url}{path}", f"{url}{path}", "--key", str(key), "--mode", mode)
    first, second, session = lines
    expect = "verified; 5000 verified bytes" if mode == "sine" else "verified;"
    assert first.startswith(f"{url}{path}: {expect}") and second.startswith(f"{url}{path}: ")
    assert "cache=MISS (X-Cache-Status: MISS)" in first, first
    assert "cache=HIT (X-Cache-Status: HIT)" in second, second
    assert session.startswith("session:")
    # what the client printed is what nginx itself decided and logged
    assert _cache_log(log, path, 2) == ["MISS", "HIT"]
