"""Connection state hand-over in the middle of a download (the seam SSLACC builds on).

A small blocking server loop (in a thread) serves one 1 MiB response.  After
about half of the body, it calls ``export_state()``, throws the connection
object away and continues with ``ServerConnection.import_state(config, blob)``
-- a fresh object that knows only the exported bytes.  Python's ``ssl`` client
must finish the download byte-exact without noticing: sequence numbers, MAC
and cipher keys and the CBC state all have to carry over.  A second request
on the same connection, decrypted by the imported object, checks the
client-to-server direction as well.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop.tls_peers import (
    ALL_SUITES,
    MIB,
    assert_same_bytes,
    file_bytes,
    python_ssl_context,
    suite_id,
)
from tls12 import ServerConfig, ServerConnection
from tls12.certs import Credentials
from tls12.events import ApplicationData
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

RECORD = 16384
REPO = Path(__file__).resolve().parents[2]
CHILD = "tests.interop.handover_child"
"""Run with ``python -m`` from the repository root, so it imports its helpers by path."""
SECOND_BODY = b"second response, sent by the imported connection object\n"


def _read_request(sock: socket.socket, conn: ServerConnection) -> bytes:
    """Feed socket bytes to ``conn`` until one full HTTP request head arrived."""
    request = b""
    while b"\r\n\r\n" not in request:
        data = sock.recv(65536)
        events = conn.receive_data(data)
        request += b"".join(e.data for e in events if isinstance(e, ApplicationData))
        sock.sendall(conn.data_to_send())
        if not data:
            raise ConnectionError("client left before sending a request")
    return request


def _serve_with_handover(
    listener: socket.socket,
    config: ServerConfig,
    body: bytes,
    handover_at: int,
    report: dict[str, object],
    handover: Callable[[ServerConnection], ServerConnection],
) -> None:
    """Accept one connection and answer two requests on it.

    The first gets ``body`` with the state hand-over at ``handover_at``; the
    second (read and decrypted by the *imported* object, so the client-to-server
    direction is checked too) gets :data:`SECOND_BODY` and ``Connection: close``.
    """
    sock, _ = listener.accept()
    sock.settimeout(30)
    with sock:
        conn = ServerConnection(config)
        report["first_request"] = _read_request(sock, conn)
        conn.send_data(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
        sock.sendall(conn.data_to_send())
        sent = 0
        while sent < len(body):
            if "handover_offset" not in report and sent >= handover_at:
                old = conn
                conn = handover(conn)
                assert conn is not old
                report["handover_offset"] = sent
            conn.send_data(body[sent : sent + RECORD])
            sock.sendall(conn.data_to_send())
            sent += RECORD
        report["second_request"] = _read_request(sock, conn)
        conn.send_data(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(SECOND_BODY), SECOND_BODY)
        )
        conn.close()
        sock.sendall(conn.data_to_send())


@pytest.mark.parametrize("suite", ALL_SUITES, ids=suite_id)
def test_export_import_mid_download_is_invisible_to_python_ssl(credentials: Credentials, suite: int) -> None:
    config = ServerConfig(credentials=credentials, cipher_suites=(suite,))
    body = file_bytes(MIB, seed=7)
    report: dict[str, object] = {}

    def handover(conn: ServerConnection) -> ServerConnection:
        blob = conn.export_state()
        assert isinstance(blob, bytes)
        report["blob_size"] = len(blob)
        del conn  # the old object is gone: only the blob survives
        return ServerConnection.import_state(config, blob)

    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(30)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                _serve_with_handover(listener, config, body, len(body) // 2, report, handover)
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        client = http.client.HTTPSConnection(
            "127.0.0.1", listener.getsockname()[1], timeout=60, context=python_ssl_context(suite)
        )
        try:
            client.request("GET", "/first")
            first = client.getresponse()
            got = first.read()
            client.request("GET", "/second")  # same TLS connection (keep-alive)
            second = client.getresponse()
            got_second = second.read()
        finally:
            client.close()
        thread.join(30)
    assert not thread.is_alive()
    assert not errors, f"server loop failed: {errors[0]!r}"
    assert first.status == 200 and second.status == 200
    assert_same_bytes(got, body)
    assert got_second == SECOND_BODY
    assert report["second_request"].startswith(b"GET /second ")  # type: ignore[attr-defined]
    assert report["handover_offset"] == len(body) // 2
    assert 0 < int(report["blob_size"]) < 64 * 1024  # type: ignore[call-overload]


def _serve_first_half_then_spawn(
    listener: socket.socket, config: ServerConfig, body: bytes, handover_at: int, child_args: list[str], report: dict[str, object]
) -> None:
    """Serve the head and half the body, export the state, and let a child process finish."""
    sock, _ = listener.accept()
    sock.settimeout(30)
    with sock:
        conn = ServerConnection(config)
        _read_request(sock, conn)
        conn.send_data(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
        sock.sendall(conn.data_to_send())
        for start in range(0, handover_at, RECORD):
            conn.send_data(body[start : start + RECORD])
            sock.sendall(conn.data_to_send())
        blob = conn.export_state()
        cmd = [sys.executable, "-m", CHILD, "--fd", str(sock.fileno()), *child_args, "--offset", str(handover_at)]
        child = subprocess.run(cmd, input=blob, capture_output=True, timeout=60, pass_fds=(sock.fileno(),), cwd=REPO)
        report["child"] = child
    # the parent's copy of the socket is closed here; the child already finished with its own


def test_export_in_one_process_import_in_another(credentials: Credentials, cert_files: tuple[Path, Path]) -> None:
    """The SSLACC situation: another process continues the connection from the blob alone."""
    suite = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA
    config = ServerConfig(credentials=credentials, cipher_suites=(suite,))
    seed = 11
    body = file_bytes(MIB, seed=seed)
    child_args = [
        "--cert", str(cert_files[0]), "--key", str(cert_files[1]), "--suite", str(int(suite)),
        "--size", str(MIB), "--seed", str(seed),
    ]  # fmt: skip
    report: dict[str, object] = {}
    errors: list[BaseException] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(30)

        def run() -> None:
            try:
                _serve_first_half_then_spawn(listener, config, body, MIB // 2, child_args, report)
            except BaseException as exc:  # surfaced by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        client = http.client.HTTPSConnection("127.0.0.1", listener.getsockname()[1], timeout=60, context=python_ssl_context(suite))
        try:
            client.request("GET", "/first")
            got = client.getresponse().read()
            client.request("GET", "/second")
            second = client.getresponse().read()
        finally:
            client.close()
        thread.join(60)
    assert not errors, f"server loop failed: {errors[0]!r}"
    child = report["child"]
    assert isinstance(child, subprocess.CompletedProcess)
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-3000:]
    assert_same_bytes(got, body)
    assert second == b"second response, sent by another process\n"
