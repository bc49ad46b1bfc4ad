"""GnuTLS's ``gnutls-cli``, a third independent TLS client, through the SSL-splitting proxy.

``printf 'GET /f HTTP/1.0\\r\\n\\r\\n' | gnutls-cli ...`` sends the request and,
at the end of its standard input -- as soon as the socket has nothing to read
at that moment -- sends close_notify while the response is still arriving: a
TLS half-close.  The client's close_notify ends only the client's direction;
a server finishes the response it has committed to, and so must the proxy.

The programs run as deployed, each in its own process: ``python -m
sslsplit.server``, ``python -m sslsplit.proxy`` and, for comparison,
``python -m testbed.https_server``.  The proxy keeps no payloads
(``--memory-mb 0``), so every download is a cold one: fetching each payload
from the origin's record store makes the proxy slower than the origin, which
is exactly when gnutls-cli finds its socket idle and closes early (and the
origin, done long before, closes its socket with that close_notify unread).
Each case runs several times to catch the race.  Bodies are compared byte for
byte (SHA-256), and gnutls-cli must have seen the server's close_notify.

With ``--logfile`` gnutls-cli writes its status lines there, and its standard
output is exactly the HTTP response.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.interop.tls_peers import CLIENT_TIMEOUT, file_bytes, split_http_response

pytestmark = pytest.mark.interop

SIZE = 512 * 1024
REPEATS = 3
# gnutls priority strings naming exactly the suite of each proxy mode, and how gnutls-cli reports it
PRIORITY = {
    "null": ("NONE:+VERS-TLS1.2:+NULL:+SHA1:+RSA:+COMP-NULL:+SIGN-ALL", "(RSA)-(NULL)-(SHA1)"),
    "key-expose": ("NONE:+VERS-TLS1.2:+AES-128-CBC:+SHA1:+RSA:+COMP-NULL:+SIGN-ALL", "(RSA)-(AES-128-CBC)-(SHA1)"),
}


@dataclass
class GnutlsResult:
    returncode: int
    response: bytes
    log: str
    stderr: str


def gnutls_cli() -> str:
    """Path of gnutls-cli, or fail the test with an install hint (never skip)."""
    path = shutil.which("gnutls-cli")
    if path is None:
        pytest.fail("gnutls-cli is required for interop tests but is not installed (apt-get install gnutls-bin)")
    return path


def gnutls_get(port: int, path: str, priority: str, logfile: Path) -> GnutlsResult:
    """``printf 'GET path HTTP/1.0\\r\\n\\r\\n' | gnutls-cli``: request, then close_notify at stdin's end."""
    cmd = [gnutls_cli(), "--insecure", f"--priority={priority}", f"--logfile={logfile}", "--port", str(port), "127.0.0.1"]
    request = f"GET {path} HTTP/1.0\r\n\r\n".encode()
    result = subprocess.run(cmd, input=request, capture_output=True, timeout=CLIENT_TIMEOUT)
    return GnutlsResult(result.returncode, result.stdout, logfile.read_text(errors="replace"), result.stderr.decode(errors="replace"))


def assert_whole_response(result: GnutlsResult, want: bytes, suite_text: str) -> None:
    assert result.returncode == 0, result.stderr + result.log[-300:]
    assert suite_text in result.log, result.log[-300:]
    status, headers, body = split_http_response(result.response)
    assert status == 200
    assert int(headers["content-length"]) == len(want)
    assert (len(body), hashlib.sha256(body).hexdigest()) == (len(want), hashlib.sha256(want).hexdigest())
    # the response ended with the server's close_notify, not with a bare TCP close
    assert "Peer has closed the GnuTLS connection" in result.log, result.log[-300:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], ready: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m ...``; returns the process and its first line once it contains ``ready``."""
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if ready not in line:
        proc.kill()
        raise AssertionError(f"{args[0]} did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, line


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM (an orderly stop); returns the program's remaining standard output."""
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out


@dataclass
class Deployment:
    body: bytes
    proxy_port: int
    https_port: int
    proxy: subprocess.Popen[str]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("gnutlswww")
    body = file_bytes(SIZE, seed=7)
    (root / "f.bin").write_bytes(body)
    server, line = _start(["sslsplit.server", "--root", str(root), "--port", "0", "--store-port", "0"], "splitting server on")
    procs = [server]
    try:
        port, store = (int(p) for p in re.findall(r":(\d+)", line))
        listen = _free_port()
        proxy, _ = _start(
            ["sslsplit.proxy", "--server", f"127.0.0.1:{port}", "--store", f"127.0.0.1:{store}",
             "--listen", f"127.0.0.1:{listen}", "--memory-mb", "0"],
            "splitting proxy on",
        )  # fmt: skip
        procs.append(proxy)
        https, line = _start(["testbed.https_server", "--root", str(root), "--port", "0", "--ciphers", "NULL-SHA:AES128-SHA"], "listening on")
        procs.append(https)
        yield Deployment(body, listen, int(line.rsplit(":", 1)[1]), proxy)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                _stop(proc)


@pytest.mark.parametrize("repeat", range(REPEATS))
@pytest.mark.parametrize("mode", list(PRIORITY))
def test_gnutls_half_close_through_cold_proxy(deployment: Deployment, mode: str, repeat: int, tmp_path: Path) -> None:
    priority, suite_text = PRIORITY[mode]
    result = gnutls_get(deployment.proxy_port, "/f.bin", priority, tmp_path / "gnutls.log")
    assert_whole_response(result, deployment.body, suite_text)


@pytest.mark.parametrize("repeat", range(REPEATS))
@pytest.mark.parametrize("mode", list(PRIORITY))
def test_gnutls_half_close_direct_to_origin(deployment: Deployment, mode: str, repeat: int, tmp_path: Path) -> None:
    priority, suite_text = PRIORITY[mode]
    result = gnutls_get(deployment.https_port, "/f.bin", priority, tmp_path / "gnutls.log")
    assert_whole_response(result, deployment.body, suite_text)


def test_no_proxied_connection_failed(deployment: Deployment, tmp_path: Path) -> None:
    """Last in this module: the proxy's own count of failed connections, printed when it stops.

    With ``pytest -n`` the tests above may have run on another worker, with a deployment of its
    own; so this test makes its own cold downloads through the proxy first (the count then
    covers at least these, and every download on this worker's proxy)."""
    for mode, (priority, suite_text) in PRIORITY.items():
        for _ in range(REPEATS):
            result = gnutls_get(deployment.proxy_port, "/f.bin", priority, tmp_path / f"{mode}.log")
            assert_whole_response(result, deployment.body, suite_text)
    out = _stop(deployment.proxy)
    match = re.search(r"(\d+) connections \((\d+) failed\)", out)
    assert match is not None, out
    assert int(match.group(1)) >= REPEATS * len(PRIORITY)
    assert match.group(2) == "0", out
