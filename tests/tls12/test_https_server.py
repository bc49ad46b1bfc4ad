"""The static-file HTTPS server: HTTP semantics, path safety, streaming, and its CLI.

Requests go through our own TLS client (:func:`tls12.aio.connect`) with h11
on the client side too, so several requests can share one connection
(keep-alive).  Interop with curl, openssl and Python ``ssl`` is in
``tests/interop``.
"""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import os
import selectors
import socket
import ssl
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import h11
import pytest

from tls12 import ClientConfig, ServerConfig
from tls12.aio import connect
from tls12.certs import Credentials, generate_self_signed, write_credentials
from tls12.errors import LocalProtocolError
from tls12.https_server import BackgroundServer, resolve_target
from tls12.suites import CipherSuite

REPO = Path(__file__).resolve().parents[2]
SUITE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA
BIG = 24 << 20


@lru_cache(maxsize=1)
def credentials() -> Credentials:
    return generate_self_signed()


@dataclass
class Response:
    status: int
    headers: dict[bytes, bytes]
    body: bytes
    body_sha256: str


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("site")
    www = base / "www"
    (www / "sub").mkdir(parents=True)
    (www / "empty-dir").mkdir()
    (www / "hello.txt").write_bytes(b"hello, world\n")
    (www / "sub" / "index.html").write_bytes(b"<p>index</p>\n")
    (www / "big.bin").write_bytes(os.urandom(BIG))
    (base / "secret.txt").write_bytes(b"outside the root\n")
    (www / "escape").symlink_to(base / "secret.txt")
    (www / "leaky").mkdir()
    (www / "leaky" / "index.html").symlink_to(base / "secret.txt")
    return www


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[BackgroundServer]:
    config = ServerConfig(credentials=credentials(), cipher_suites=(SUITE,))
    with BackgroundServer(root, config, handshake_timeout=2.0, idle_timeout=1.0) as srv:
        yield srv


async def _exchange(port: int, requests: list[h11.Request], keep_body: bool = True) -> list[Response]:
    """Send ``requests`` one after another on one TLS connection; parse the responses with h11."""
    stream = await connect("127.0.0.1", port, ClientConfig(server_name="localhost", cipher_suites=(SUITE,)))
    client = h11.Connection(h11.CLIENT)
    responses: list[Response] = []
    try:
        for request in requests:
            if client.our_state is h11.DONE and client.their_state is h11.DONE:
                client.start_next_cycle()
            body = request_bodies.pop(id(request), (None, b""))[1]
            out = client.send(request) + (client.send(h11.Data(data=body)) if body else b"")
            stream.write(out + client.send(h11.EndOfMessage()))
            await stream.drain()
            status, headers, parts, digest = 0, {}, [], hashlib.sha256()
            while True:
                event = client.next_event()
                if event is h11.NEED_DATA:
                    async with asyncio.timeout(30):
                        client.receive_data(await stream.read())
                elif isinstance(event, h11.Response):
                    status, headers = event.status_code, dict(event.headers)
                elif isinstance(event, h11.Data):
                    digest.update(event.data)
                    if keep_body:
                        parts.append(bytes(event.data))
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
            responses.append(Response(status, headers, b"".join(parts), digest.hexdigest()))
    finally:
        await stream.close()
    return responses


request_bodies: dict[int, tuple[h11.Request, bytes]] = {}
"""Bodies of the requests built by :func:`get`, by ``id`` of the request.  The entry keeps the
request alive, so its ``id`` cannot be reused by another request before the body is sent."""


def get(target: bytes | str, method: bytes = b"GET", *extra: tuple[bytes, bytes], body: bytes = b"") -> h11.Request:
    headers = [(b"Host", b"localhost"), *extra]
    if body:
        headers.append((b"Content-Length", str(len(body)).encode()))
    request = h11.Request(method=method, target=target, headers=headers)
    if body:
        request_bodies[id(request)] = (request, body)
    return request


def fetch(server: BackgroundServer, *requests: h11.Request, keep_body: bool = True) -> list[Response]:
    return asyncio.run(_exchange(server.port, list(requests), keep_body))


# -- path resolution (pure) --------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"/hello.txt", 200),
        (b"/hello.txt?x=1#frag", 200),
        (b"/%68ello.txt", 200),
        (b"/sub/", 200),
        (b"/sub", 200),
        (b"/empty-dir/", 404),
        (b"/missing", 404),
        (b"/../secret.txt", 403),
        (b"/sub/../../secret.txt", 403),
        (b"/%2e%2e/secret.txt", 403),
        (b"/%2E%2E%2Fsecret.txt", 403),
        (b"/escape", 403),
        (b"/leaky/", 403),
        (b"relative", 400),
        (b"/a%00b", 400),
        (b"/a\\..\\b", 400),
        (b"/%ff", 400),
    ],
)
def test_resolve_target(root: Path, target: bytes, status: int) -> None:
    got, path = resolve_target(root.resolve(), target)
    assert got == status
    assert (path is not None) == (status == 200)
    if path is not None:
        assert path.is_relative_to(root.resolve())


# -- over the wire --------------------------------------------------------------------


def test_get_file_with_headers(server: BackgroundServer) -> None:
    (resp,) = fetch(server, get("/hello.txt"))
    assert resp.status == 200
    assert resp.body == b"hello, world\n"
    assert resp.headers[b"content-length"] == b"13"
    assert resp.headers[b"content-type"] == b"text/plain"


def test_directory_serves_index_html(server: BackgroundServer) -> None:
    (resp,) = fetch(server, get("/sub/"))
    assert (resp.status, resp.body) == (200, b"<p>index</p>\n")
    assert resp.headers[b"content-type"] == b"text/html"


def test_404_403_and_head(server: BackgroundServer) -> None:
    missing, traversal, escape, head = fetch(
        server, get("/nope.txt"), get("/../secret.txt"), get("/escape"), get("/hello.txt", b"HEAD")
    )
    assert missing.status == 404
    assert traversal.status == 403 and b"outside" not in traversal.body
    assert escape.status == 403
    assert head.status == 200
    assert head.headers[b"content-length"] == b"13"
    assert head.body == b""


def test_other_methods_get_405_with_allow(server: BackgroundServer) -> None:
    post, after = fetch(server, get("/hello.txt", b"POST", body=b"a=1"), get("/hello.txt"))
    assert post.status == 405
    assert post.headers[b"allow"] == b"GET, HEAD"
    assert after.body == b"hello, world\n"  # the request body was consumed, keep-alive goes on


def test_keep_alive_serves_many_requests_on_one_connection(server: BackgroundServer) -> None:
    before = server.wait_idle()
    responses = fetch(server, *[get("/hello.txt") for _ in range(5)], get("/sub/"))
    assert [r.status for r in responses] == [200] * 6
    server.wait_idle()
    record = server.stats.connections[before]
    assert record.requests == 6
    assert record.cipher_suite == SUITE
    assert record.bytes_out > 6 * len(b"hello, world\n")


def test_pipelined_requests_are_answered_in_order(server: BackgroundServer) -> None:
    """Three requests in one TLS write; the last asks the server to close."""

    async def main() -> bytes:
        stream = await connect("127.0.0.1", server.port, ClientConfig(server_name="localhost", cipher_suites=(SUITE,)))
        req = b"GET %s HTTP/1.1\r\nHost: localhost\r\n%s\r\n"
        stream.write(req % (b"/hello.txt", b"") + req % (b"/sub/", b"") + req % (b"/missing", b"Connection: close\r\n"))
        async with asyncio.timeout(10):
            data = await stream.read_all()
        await stream.close()
        return data

    data = asyncio.run(main())
    assert data.count(b"HTTP/1.1 ") == 3
    first = data.index(b"hello, world\n")
    second = data.index(b"<p>index</p>\n")
    third = data.index(b"HTTP/1.1 404 ")
    assert first < second < third


def test_bad_http_gets_400_and_close(server: BackgroundServer) -> None:
    async def main() -> bytes:
        stream = await connect("127.0.0.1", server.port, ClientConfig(server_name="localhost", cipher_suites=(SUITE,)))
        stream.write(b"THIS IS NOT HTTP\r\n\r\n")
        async with asyncio.timeout(10):
            data = await stream.read_all()
        await stream.close()
        return data

    data = asyncio.run(main())
    assert data.startswith(b"HTTP/1.1 400 ")
    assert b"connection: close" in data.lower()


def test_idle_keep_alive_connection_is_closed_cleanly(server: BackgroundServer) -> None:
    async def main() -> tuple[bytes, bool, float]:
        stream = await connect("127.0.0.1", server.port, ClientConfig(server_name="localhost", cipher_suites=(SUITE,)))
        start = time.monotonic()
        async with asyncio.timeout(10):
            data = await stream.read_all()
        await stream.close()
        return data, stream.closed_cleanly, time.monotonic() - start

    data, clean, seconds = asyncio.run(main())
    assert data == b""
    assert clean  # close_notify from the server, not a bare FIN
    assert 0.8 <= seconds < 5


def test_trickled_request_head_is_cut_at_the_idle_timeout(server: BackgroundServer) -> None:
    """An HTTP-level slow-loris: one byte of the request head every 0.3 s never completes."""

    async def main() -> tuple[bytes, float]:
        stream = await connect("127.0.0.1", server.port, ClientConfig(server_name="localhost", cipher_suites=(SUITE,)))
        start = time.monotonic()
        received = b""
        async with asyncio.timeout(10):
            for byte in b"GET /hello.txt HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                try:
                    stream.write(bytes([byte]))
                    await stream.drain()
                except (ConnectionError, LocalProtocolError):
                    break  # the server closed first
                await asyncio.sleep(0.3)
                if stream.at_eof:
                    break
                # notice the server's close_notify as soon as it comes
                try:
                    async with asyncio.timeout(0.01):
                        received += await stream.read()
                except TimeoutError:
                    pass
        await stream.close()
        return received, time.monotonic() - start

    received, seconds = asyncio.run(main())
    assert received == b""
    assert seconds < 6, f"the connection stayed open {seconds:.1f} s with an idle timeout of 1 s"


def test_large_file_is_streamed_not_loaded(server: BackgroundServer, root: Path) -> None:
    """A 24 MiB download while tracemalloc watches the whole process (server thread included)."""
    want = hashlib.sha256((root / "big.bin").read_bytes()).hexdigest()
    tracemalloc.start()
    try:
        (resp,) = fetch(server, get("/big.bin"), keep_body=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert resp.status == 200
    assert resp.body_sha256 == want
    assert peak < 8 << 20, f"peak traced memory {peak / 2**20:.1f} MiB for a {BIG >> 20} MiB file"


# -- command line ---------------------------------------------------------------------


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def test_cli_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "tls12.https_server", "--help"], capture_output=True, text=True, timeout=60, env=_env())
    assert proc.returncode == 0
    for option in ("--root", "--port", "--host", "--cert", "--key", "--ciphers", "--session-cache"):
        assert option in proc.stdout


def test_cli_rejects_cert_without_key(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tls12.https_server", "--root", str(tmp_path), "--cert", str(tmp_path / "c.pem")],
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--cert and --key" in proc.stderr


def _start_cli(*args: str) -> tuple[subprocess.Popen[str], int]:
    """Start ``python -m tls12.https_server`` and wait for its "listening on" line."""
    cmd = [sys.executable, "-m", "tls12.https_server", "--port", "0", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=30):
        proc.kill()
        pytest.fail("server did not print its address within 30 s")
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on https://127.0.0.1:"), line
    return proc, int(line.rsplit(":", 1)[1])


def _stop_cli(proc: subprocess.Popen[str]) -> str:
    proc.terminate()  # SIGTERM: the server stops cleanly
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return err


def test_cli_self_signed_null_suite_and_session_cache(root: Path) -> None:
    """No --cert: a fresh self-signed certificate; --session-cache lets Python's ssl resume."""
    proc, port = _start_cli("--root", str(root), "--ciphers", "NULL-SHA256", "--session-cache")
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("NULL-SHA256:@SECLEVEL=0")
        session = None
        for expect_reused in (False, True):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
            conn.connect()
            if session is not None:  # resume by session ID: wrap a new socket with the old session
                conn.sock.close()
                raw = socket.create_connection(("127.0.0.1", port), timeout=30)
                conn.sock = ctx.wrap_socket(raw, session=session)
            conn.request("GET", "/hello.txt")
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, b"hello, world\n")
            tls = conn.sock
            assert isinstance(tls, ssl.SSLSocket)
            assert tls.cipher()[0] == "NULL-SHA256"
            assert tls.session_reused is expect_reused
            session = tls.session
            conn.close()
    finally:
        _stop_cli(proc)


def test_cli_serves_with_given_certificate(root: Path, tmp_path: Path) -> None:
    creds = credentials()
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    write_credentials(creds, cert, key)
    proc, port = _start_cli(
        "--root", str(root), "--cert", str(cert), "--key", str(key), "--ciphers", "ECDHE-RSA-AES128-SHA256:AES128-SHA"
    )
    try:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cert)  # our certificate verifies for 127.0.0.1
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
        conn.request("GET", "/hello.txt")
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"hello, world\n")
        # Python's default cipher list (no SHA-1 MACs) picks our ECDHE-SHA256 suite
        assert conn.sock.cipher()[0] == "ECDHE-RSA-AES128-SHA256"  # type: ignore[union-attr]
        conn.close()
    finally:
        err = _stop_cli(proc)
    assert '"GET /hello.txt HTTP/1.1" 200 body=13' in err
