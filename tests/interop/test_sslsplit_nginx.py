"""SSL splitting in front of a real nginx: the deployment of paper §5.4 with today's web server.

A site already served over plain HTTP by nginx adds SSL splitting without
touching nginx: ``python -m sslsplit.server --upstream HOST:PORT`` terminates
TLS (as STunnel did in the paper) and forwards each request to nginx, and
volunteers run ``python -m sslsplit.proxy``.  Both programs run here as
subprocesses exactly as a user would start them; nginx runs with its own
configuration in a temporary prefix (``daemon off``, pid, logs and temp paths
inside it) and is always stopped at teardown.

Between proxy and origin sit two recording taps (:mod:`split_taps`), so the
bytes the origin sends -- stubs plus cache-miss payloads -- are counted on the
wire, independently of the programs' own counters.  Unmodified curl and
Python ``ssl`` clients fetch nginx's files through the proxy; bodies must be
byte-identical to the files, and a second (warm) fetch of a 1 MiB file must
cost the origin at most 5 % of the file.
"""

from __future__ import annotations

import asyncio
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sslsplit.aio import BackgroundLoop
from tests.interop.split_taps import Tap
from tests.interop.tls_peers import (
    MIB,
    assert_same_bytes,
    curl,
    file_bytes,
    python_ssl_get,
    require_tool,
    suite_id,
)
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

SIZES = [0, 1, 4000, 16384, 100_000, MIB]
STARTUP_TIMEOUT = 20.0

NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/tmp_body;
    proxy_temp_path {prefix}/tmp_proxy;
    fastcgi_temp_path {prefix}/tmp_fastcgi;
    uwsgi_temp_path {prefix}/tmp_uwsgi;
    scgi_temp_path {prefix}/tmp_scgi;
    types {{ application/octet-stream bin; }}
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


def _free_port() -> int:
    """A port that was free a moment ago (nginx and the programs cannot be told to pick one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _logs(*paths: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in paths if p.exists())


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str, logs: tuple[Path, ...]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}: {_logs(*logs)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"{what} did not listen on {port} within {STARTUP_TIMEOUT} s: {_logs(*logs)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process started in its own session, and everything it started (nginx's worker)."""
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


def _start(cmd: list[str], port: int, what: str, log: Path, *more_logs: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own session (output to ``log``) and wait until it listens on ``port``."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for_port(port, proc, what, (log, *more_logs))
    except BaseException:
        _stop(proc)
        raise
    return proc


@dataclass
class Deployment:
    """nginx, the splitting origin in front of it, a proxy, and the taps on the proxy--origin link."""

    files: dict[str, bytes]
    proxy_port: int
    stubs: Tap
    store: Tap
    loop: BackgroundLoop
    access_log: Path

    @property
    def origin_bytes(self) -> int:
        """Everything the splitting origin has sent to the proxy so far: stubs and cache-miss payloads."""
        return self.stubs.bytes_down + self.store.bytes_down

    def wait_idle(self, connections: int) -> None:
        """Wait until ``connections`` proxy--origin connections exist and all have ended."""

        async def wait() -> None:
            while len(self.stubs.connections) < connections:
                await asyncio.sleep(0.01)
            await asyncio.gather(*(c.origin_closed.wait() for c in self.stubs.connections))

        self.loop.run(asyncio.wait_for(wait(), 30))


def _nginx_conf(prefix: Path, root: Path, port: int) -> str:
    # As root, nginx's worker would switch to an unprivileged user that cannot read a private
    # temporary directory; keep it as the user running the tests instead.
    user = ""
    if os.geteuid() == 0:
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"
    return NGINX_CONF.format(user=user, prefix=prefix, root=root, port=port)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    base = tmp_path_factory.mktemp("nginx-split")
    root, prefix = base / "www", base / "nginx"
    root.mkdir()
    prefix.mkdir()
    files = {f"file_{n}.bin": file_bytes(n, seed=11) for n in SIZES} | {"big.bin": file_bytes(MIB, seed=12)}
    for name, data in files.items():
        (root / name).write_bytes(data)
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if exe is None:
        pytest.fail("nginx is required for this interop test but is not installed (apt-get install nginx-light)")
    require_tool("curl")

    nginx_port, split_port, store_port, proxy_port = (_free_port() for _ in range(4))
    conf = prefix / "nginx.conf"
    conf.write_text(_nginx_conf(prefix, root, nginx_port))
    procs: list[subprocess.Popen[bytes]] = []
    with BackgroundLoop() as loop:
        stubs, store = Tap(("127.0.0.1", split_port)), Tap(("127.0.0.1", store_port))
        try:
            procs.append(_start([exe, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")],
                                nginx_port, "nginx", prefix / "stdout.log", prefix / "error.log"))  # fmt: skip
            procs.append(_start(
                [sys.executable, "-m", "sslsplit.server", "--upstream", f"127.0.0.1:{nginx_port}",
                 "--port", str(split_port), "--store-port", str(store_port)],
                store_port, "python -m sslsplit.server", base / "server.log",
            ))  # fmt: skip
            loop.run(stubs.start())
            loop.run(store.start())
            procs.append(_start(
                [sys.executable, "-m", "sslsplit.proxy", "--server", f"127.0.0.1:{stubs.port}",
                 "--store", f"127.0.0.1:{store.port}", "--listen", f"127.0.0.1:{proxy_port}"],
                proxy_port, "python -m sslsplit.proxy", base / "proxy.log",
            ))  # fmt: skip
            yield Deployment(files, proxy_port, stubs, store, loop, prefix / "access.log")
        finally:
            for proc in reversed(procs):
                _stop(proc)
            loop.run(stubs.close())
            loop.run(store.close())


CLIENT_SUITES = [
    CipherSuite.TLS_RSA_WITH_NULL_SHA,
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256,
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
]


@pytest.mark.parametrize("suite", CLIENT_SUITES, ids=suite_id)
def test_curl_and_python_ssl_get_nginx_files_byte_exact(deployment: Deployment, suite: CipherSuite, tmp_path: Path) -> None:
    for size in SIZES:
        name = f"file_{size}.bin"
        out = tmp_path / name
        result = curl(f"https://127.0.0.1:{deployment.proxy_port}/{name}", suite, out, "--fail", timeout=60)
        assert result.returncode == 0, result.stderr
        assert_same_bytes(out.read_bytes(), deployment.files[name], f"curl {name}")
        status, body, cipher = python_ssl_get(deployment.proxy_port, f"/{name}", suite, timeout=60)
        assert status == 200 and cipher is not None
        assert_same_bytes(body, deployment.files[name], f"Python ssl {name}")
    # nginx itself served every one of those requests
    log = deployment.access_log.read_text()
    for size in SIZES:
        assert len(re.findall(rf'"GET /file_{size}\.bin HTTP/1\.1" 200 {size} ', log)) >= 2


def test_nginx_404_reaches_the_client_through_the_split(deployment: Deployment, tmp_path: Path) -> None:
    out = tmp_path / "missing.html"
    result = curl(f"https://127.0.0.1:{deployment.proxy_port}/missing.bin", CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, out,
                  "--write-out", "%{http_code}", timeout=60)  # fmt: skip
    assert result.returncode == 0 and result.stdout == "404", result.stderr
    assert b"nginx" in out.read_bytes()  # nginx's own error page


def test_warm_fetch_costs_the_origin_little(deployment: Deployment, tmp_path: Path) -> None:
    """Cold: the origin sends the 1 MiB body (as store payloads). Warm: only handshake, head and stubs."""
    big = deployment.files["big.bin"]
    suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
    sent = []
    for attempt in ("cold", "warm"):
        deployment.wait_idle(len(deployment.stubs.connections))
        before = deployment.origin_bytes
        out = tmp_path / f"{attempt}.bin"
        result = curl(f"https://127.0.0.1:{deployment.proxy_port}/big.bin", suite, out, "--fail", timeout=60)
        assert result.returncode == 0, result.stderr
        assert_same_bytes(out.read_bytes(), big, f"{attempt} body")
        deployment.wait_idle(len(deployment.stubs.connections))
        sent.append(deployment.origin_bytes - before)
    cold, warm = sent
    assert cold > len(big)  # every body record crossed the origin's link once
    assert warm <= 0.05 * len(big), f"warm fetch cost the origin {warm} B for a {len(big)} B file"
    assert len(re.findall(r'"GET /big\.bin HTTP/1\.1" 200 1048576 ', deployment.access_log.read_text())) == 2
