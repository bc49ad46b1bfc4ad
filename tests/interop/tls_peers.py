"""Helpers to run real TLS peers against the testbed: curl, openssl, Python ``ssl``, a relay.

Everything here talks to loopback only, has a timeout, and cleans up its
subprocesses and threads.  Clients are *unmodified*: the only client-side
setting besides choosing the suite is ``@SECLEVEL=0`` for NULL suites, which
OpenSSL 3 refuses otherwise.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testbed.apps.harness import BackgroundServer
from testbed.apps.stats import ConnectionRecord
from tls12.suites import SUITES, CipherSuite

ALL_SUITES: list[CipherSuite] = list(SUITES)
SIZES: list[int] = [0, 1, 4000, 16384, 1 << 20, 16 << 20]
MIB = 1 << 20
CLIENT_TIMEOUT = 120.0


def suite_id(suite: CipherSuite) -> str:
    """Readable pytest id: the OpenSSL name."""
    return SUITES[suite].openssl_name


def openssl_ciphers(suite: CipherSuite) -> str:
    """OpenSSL cipher string for one suite (NULL suites need security level 0)."""
    params = SUITES[suite]
    return f"{params.openssl_name}:@SECLEVEL=0" if params.cipher == "null" else params.openssl_name


def require_tool(name: str) -> str:
    """Path of an executable, or fail the test with an install hint (never skip)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is required for interop tests but is not installed (apt-get install {name})")
    return path


def file_bytes(size: int, seed: int = 0) -> bytes:
    """Deterministic pseudo-random content of ``size`` bytes."""
    return random.Random(seed * 1_000_003 + size).randbytes(size)


def make_docroot(root: Path, sizes: list[int]) -> dict[int, bytes]:
    """Write ``file_<size>.bin`` files; returns their contents by size."""
    root.mkdir(parents=True, exist_ok=True)
    files = {}
    for size in sizes:
        files[size] = file_bytes(size)
        (root / f"file_{size}.bin").write_bytes(files[size])
    return files


def split_http_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` of a complete HTTP/1.x response without chunking."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, f"no end of headers in response starting {raw[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def assert_same_bytes(got: bytes, want: bytes, what: str = "body") -> None:
    """Exact comparison with a short message (no multi-megabyte diff on failure)."""
    if got == want:
        return
    first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    raise AssertionError(
        f"{what} differs: got {len(got)} bytes (sha256 {hashlib.sha256(got).hexdigest()[:16]}), "
        f"want {len(want)} bytes (sha256 {hashlib.sha256(want).hexdigest()[:16]}); first difference at offset {first}"
    )


def wait_for_record(server: BackgroundServer, count_before: int, timeout: float = 10.0) -> ConnectionRecord:
    """The server's record of the next connection to finish after ``count_before`` were recorded."""
    deadline = time.monotonic() + timeout
    while len(server.stats.connections) <= count_before:
        if time.monotonic() > deadline:
            raise AssertionError(f"the server recorded no finished connection within {timeout} s")
        time.sleep(0.005)
    return server.stats.connections[count_before]


# -- clients ---------------------------------------------------------------------


def curl(url: str, suite: CipherSuite, out: Path, *extra: str, timeout: float = CLIENT_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run curl (``-k``, one suite) writing the body of ``url`` to ``out``; ``extra`` goes last."""
    cmd = [require_tool("curl"), "--silent", "--show-error", "--insecure", "--ciphers", openssl_ciphers(suite), url, "--output", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def s_client_get(port: int, path: str, suite: CipherSuite, timeout: float = CLIENT_TIMEOUT) -> subprocess.CompletedProcess[bytes]:
    """``openssl s_client`` sends a scripted GET on stdin; stdout holds exactly the response bytes."""
    cmd = [
        require_tool("openssl"), "s_client", "-connect", f"127.0.0.1:{port}",
        "-cipher", openssl_ciphers(suite), "-quiet", "-ign_eof",
    ]  # fmt: skip
    request = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
    return subprocess.run(cmd, input=request, capture_output=True, timeout=timeout)


def python_ssl_context(suite: CipherSuite) -> ssl.SSLContext:
    """A default client context limited to TLS 1.2 and one suite, no certificate check."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(openssl_ciphers(suite))
    return ctx


def python_ssl_get(port: int, path: str, suite: CipherSuite, timeout: float = CLIENT_TIMEOUT) -> tuple[int, bytes, str | None]:
    """GET with ``http.client`` over Python's ``ssl``: ``(status, body, negotiated cipher)``."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=python_ssl_context(suite))
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        assert conn.sock is not None
        cipher = conn.sock.cipher()  # type: ignore[attr-defined]
        return resp.status, body, None if cipher is None else cipher[0]
    finally:
        conn.close()


# -- openssl s_server ------------------------------------------------------------


@dataclass
class OpenSSLServer:
    """A running ``openssl s_server`` and the port it chose."""

    proc: subprocess.Popen[bytes]
    port: int
    output: list[str] = field(default_factory=list)


@contextmanager
def openssl_s_server(cert: Path, key: Path, cwd: Path, *args: str, timeout: float = 10.0) -> Iterator[OpenSSLServer]:
    """Start ``openssl s_server -accept 127.0.0.1:0`` (it prints the port it bound); kill it on exit."""
    cmd = [
        require_tool("openssl"), "s_server", "-accept", "127.0.0.1:0",
        "-cert", str(cert), "-key", str(key), *args,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    server = OpenSSLServer(proc, 0)
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("latin-1").rstrip()
            server.output.append(line)
            m = re.match(r"ACCEPT .*:(\d+)$", line)
            if m and not ready.is_set():
                server.port = int(m.group(1))
                ready.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        if not ready.wait(timeout):
            pytest.fail(f"openssl s_server did not start: {server.output}")
        yield server
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        thread.join(timeout=5)


# -- a record-aware TCP relay -------------------------------------------------------

RecordFilter = Callable[[int, bytes], tuple[bytes, bool]]
"""``filter(content_type, record) -> (bytes to forward, keep going)``; applied to server->client records."""


class Relay:
    """A loopback TCP relay that can tamper with TLS records from the server.

    Client->server bytes are copied verbatim.  Server->client bytes are cut
    into records (5-byte header + fragment) and each record is passed to
    ``record_filter``; when it says stop, the relay forwards what it returned
    and then closes both connections abruptly -- a truncation attack.
    """

    def __init__(self, upstream_port: int, record_filter: RecordFilter, timeout: float = 30.0) -> None:
        self.upstream_port = upstream_port
        self.record_filter = record_filter
        self.timeout = timeout
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(timeout)
        self.port = self.listener.getsockname()[1]
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._accept_thread = threading.Thread(target=self._accept_once, daemon=True)

    def __enter__(self) -> Relay:
        self._accept_thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        # shutdown() wakes threads blocked in recv()/accept(); close() alone does not
        for s in [self.listener, *self._sockets]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._accept_thread.join(5)
        for t in self._threads:
            t.join(5)

    def _accept_once(self) -> None:
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=self.timeout)
        client.settimeout(self.timeout)
        self._sockets += [client, upstream]
        for target in (lambda: self._copy(client, upstream), lambda: self._filter(upstream, client)):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)

    def _copy(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _filter(self, src: socket.socket, dst: socket.socket) -> None:
        buf = b""
        try:
            while data := src.recv(65536):
                buf += data
                while len(buf) >= 5:
                    length = int.from_bytes(buf[3:5], "big")
                    if len(buf) < 5 + length:
                        break
                    record, buf = buf[: 5 + length], buf[5 + length :]
                    out, keep_going = self.record_filter(record[0], record)
                    dst.sendall(out)
                    if not keep_going:
                        self._cut()
                        return
            dst.sendall(buf)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        except BaseException as exc:  # a bug in a filter must fail the test, not hang it
            self.errors.append(exc)
            self._cut()

    def _cut(self) -> None:
        for s in self._sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def flip_first_app_record(offset_fraction: float = 0.5) -> tuple[RecordFilter, list[int]]:
    """A filter flipping one bit in the first application-data record (type 23); returns it and a hit list."""
    hits: list[int] = []

    def record_filter(content_type: int, record: bytes) -> tuple[bytes, bool]:
        if content_type == 23 and not hits:
            pos = 5 + int((len(record) - 5) * offset_fraction)
            hits.append(pos)
            record = record[:pos] + bytes([record[pos] ^ 0x01]) + record[pos + 1 :]
        return record, True

    return record_filter, hits


def cut_after_app_records(full_records: int) -> tuple[RecordFilter, list[int]]:
    """A filter forwarding ``full_records`` application-data records, then half of the next, then cutting."""
    seen: list[int] = []

    def record_filter(content_type: int, record: bytes) -> tuple[bytes, bool]:
        if content_type != 23:
            return record, True
        seen.append(len(record))
        if len(seen) <= full_records:
            return record, True
        return record[: len(record) // 2], False

    return record_filter, seen
