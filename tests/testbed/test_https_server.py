"""The static-file HTTPS server: HTTP semantics, path safety, streaming, and its CLI.

Requests go through our own TLS client (:func:`tls12.aio.connect`) with h11
on the client side too, so several requests can share one connection
(keep-alive).  Interop with curl, openssl and Python ``ssl`` is in
``tests/interop``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import tracemalloc
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testbed.apps.file_handler import resolve_following_links, resolve_target
from testbed.apps.harness import BackgroundServer
from tls12 import ClientConfig, ServerConfig
from tls12.aio import connect
from tls12.errors import LocalProtocolError
from tls12.suites import CipherSuite
from tls12.testing import credentials

REPO = Path(__file__).resolve().parents[2]
SUITE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA
BIG = 24 << 20
PAGE30 = bytes(range(65, 95))  # a 30-byte page
MEDIUM = os.urandom(3 * 16384 + 1000)  # spans four records with or without its head
RECORD = 16384
APPLICATION_DATA = 23


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
    (www / "page30.bin").write_bytes(PAGE30)
    (www / "medium.bin").write_bytes(MEDIUM)
    (base / "secret.txt").write_bytes(b"outside the root\n")
    (www / "escape").symlink_to(base / "secret.txt")
    (www / "leaky").mkdir()
    (www / "leaky" / "index.html").symlink_to(base / "secret.txt")
    (www / "alias").symlink_to(www / "sub")  # symlinks that stay inside the root are followed
    (www / "sub" / "hello-link.txt").symlink_to(www / "hello.txt")
    return www


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[BackgroundServer]:
    config = ServerConfig(credentials=credentials(), cipher_suites=(SUITE,))
    with BackgroundServer(root, config, handshake_timeout=2.0, idle_timeout=1.0) as srv:
        yield srv


@pytest.fixture(scope="module")
def separate_server(root: Path) -> Iterator[BackgroundServer]:
    """The same server with ``coalesce=False``: the response head in a record of its own (SSL splitting's mode)."""
    config = ServerConfig(credentials=credentials(), cipher_suites=(SUITE,))
    with BackgroundServer(root, config, handshake_timeout=2.0, idle_timeout=1.0, coalesce=False) as srv:
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
        (b"/alias/", 200),
        (b"/alias/hello-link.txt", 200),
        (b"/hello.txt/x", 404),
        (b"/escape/x", 403),
        (b"/" + b"x" * 300, 404),  # ENAMETOOLONG: a 404, not an exception
        (b"/alias/" + b"x" * 300, 404),
    ],
)
def test_resolve_target(root: Path, target: bytes, status: int) -> None:
    got, path = resolve_target(root.resolve(), target)
    assert got == status
    assert (path is not None) == (status == 200)
    if path is not None:
        assert path.is_relative_to(root.resolve())


def _reference_resolve(root: Path, target: bytes) -> tuple[int, Path | None]:
    """The obviously-correct resolver: resolve every path with all symlinks, then check it."""
    try:
        path = urllib.parse.unquote(target.decode("ascii").split("?", 1)[0].split("#", 1)[0], errors="strict")
    except (UnicodeDecodeError, ValueError):
        return 400, None
    if not path.startswith("/") or "\x00" in path or "\\" in path:
        return 400, None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        return 403, None
    return resolve_following_links(root, parts)


SEGMENTS = [
    "", ".", "..", "%2e%2e", "%2E", "sub", "alias", "escape", "leaky", "empty-dir", "hello.txt", "hello-link.txt",
    "index.html", "missing", "%00", "\\", "%ff", "a%2fb", "%", "x" * 300, "?q=1", "#frag", "%2F..",
]


@settings(max_examples=300, deadline=None)
@given(segments=st.lists(st.sampled_from(SEGMENTS), max_size=5), lead=st.sampled_from(["/", "", "//"]))
def test_resolve_target_agrees_with_full_resolution(root: Path, segments: list[str], lead: str) -> None:
    """The one-lstat-per-segment fast path answers exactly as resolving every symlink would."""
    target = (lead + "/".join(segments)).encode()
    status, path = resolve_target(root.resolve(), target)
    want_status, want_path = _reference_resolve(root.resolve(), target)
    assert status == want_status, target
    assert (path is None) == (want_path is None)
    if path is not None and want_path is not None:
        assert path.resolve() == want_path
        assert path.resolve().is_relative_to(root.resolve())


@settings(max_examples=200, deadline=None)
@given(target=st.binary(max_size=64))
def test_resolve_target_never_raises(root: Path, target: bytes) -> None:
    status, path = resolve_target(root.resolve(), target)
    assert status in (200, 400, 403, 404)
    assert (path is None) != (status == 200)


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


def test_overlong_file_name_gets_404_and_keep_alive_goes_on(server: BackgroundServer) -> None:
    long_name, after = fetch(server, get(b"/" + b"x" * 300), get("/hello.txt"))
    assert long_name.status == 404
    assert after.body == b"hello, world\n"


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


def test_a_probe_is_an_accepted_connection_but_no_handshake(root: Path) -> None:
    """``handshakes`` counts handshaken connections, open or finished; a port probe is not one."""
    config = ServerConfig(credentials=credentials(), cipher_suites=(SUITE,))
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_ciphers("ECDHE-RSA-AES128-SHA")  # the server's one suite
    with BackgroundServer(root, config, idle_timeout=60.0) as server:
        socket.create_connection((server.host, server.port), timeout=10).close()  # a probe
        with socket.create_connection((server.host, server.port), timeout=10) as raw, \
                ctx.wrap_socket(raw) as tls:
            deadline = time.monotonic() + 10
            while server.stats.handshakes == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
            assert server.stats.handshakes == 1 and server.stats.closed == 1  # counted while open
            assert tls.version() == "TLSv1.2"
        server.wait_idle()
        assert (server.stats.opened, server.stats.closed, server.stats.handshakes) == (2, 2, 1)


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


# -- records on the wire: coalescing the head with the body ----------------------------


class RecordTap:
    """A loopback relay for one connection that records ``(content type, length)`` of every server record.

    Bytes pass through unchanged both ways; only the server->client direction
    is cut into TLS records (5-byte header + fragment) to count them.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(30)
        self.port: int = self.listener.getsockname()[1]
        self.records: list[tuple[int, int]] = []
        self._threads = [threading.Thread(target=self._run, daemon=True)]

    def __enter__(self) -> RecordTap:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        for t in self._threads:
            t.join(30)

    def app_records(self) -> list[int]:
        """Fragment lengths of the application-data records the server sent."""
        return [n for kind, n in self.records if kind == APPLICATION_DATA]

    def _run(self) -> None:
        client, _ = self.listener.accept()
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=30)
        client.settimeout(30)

        def up() -> None:
            try:
                while data := client.recv(65536):
                    upstream.sendall(data)
                upstream.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        t = threading.Thread(target=up, daemon=True)
        t.start()
        self._threads.append(t)
        buf = b""
        try:
            while data := upstream.recv(65536):
                client.sendall(data)
                buf += data
                while len(buf) >= 5 and len(buf) >= 5 + (n := int.from_bytes(buf[3:5], "big")):
                    self.records.append((buf[0], n))
                    buf = buf[5 + n :]
            client.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            t.join(30)
            client.close()
            upstream.close()


def _python_ssl_get_raw(port: int, path: str) -> bytes:
    """One GET over Python's ``ssl`` on a raw socket (``Connection: close``): the response bytes, head included."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE-RSA-AES128-SHA")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, ctx.wrap_socket(raw) as tls:
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        parts = []
        while chunk := tls.recv(65536):
            parts.append(chunk)
    return b"".join(parts)


def _split(raw: bytes) -> tuple[bytes, bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep and head.startswith(b"HTTP/1.1 200 "), raw[:200]
    return head + sep, body


@pytest.mark.parametrize("coalesce", [True, False], ids=["coalesced", "separate"])
def test_small_page_records_with_python_ssl(
    server: BackgroundServer, separate_server: BackgroundServer, coalesce: bool
) -> None:
    """A 30-byte page is one application-data record when coalescing, head + body records otherwise."""
    srv = server if coalesce else separate_server
    with RecordTap(srv.port) as tap:
        raw = _python_ssl_get_raw(tap.port, "/page30.bin")
    head, body = _split(raw)
    assert body == PAGE30
    records = tap.app_records()
    assert len(records) == (1 if coalesce else 2), records
    if not coalesce:  # the head alone: 16 IV + head + 20 MAC + 1..16 padding
        assert 16 + len(head) + 20 < records[0] <= 16 + len(head) + 20 + 16


@pytest.mark.parametrize("coalesce", [True, False], ids=["coalesced", "separate"])
def test_small_page_records_with_curl(
    server: BackgroundServer, separate_server: BackgroundServer, coalesce: bool, tmp_path: Path
) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail("curl is required (apt-get install curl)")
    srv = server if coalesce else separate_server
    out = tmp_path / "page"
    with RecordTap(srv.port) as tap:
        proc = subprocess.run(
            [curl, "--silent", "--show-error", "--insecure", "--ciphers", "ECDHE-RSA-AES128-SHA",
             f"https://127.0.0.1:{tap.port}/page30.bin", "--output", str(out)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == PAGE30
    assert len(tap.app_records()) == (1 if coalesce else 2), tap.records


def _cbc_sha1_record(plaintext: int) -> int:
    """Wire bytes of one AES-CBC + HMAC-SHA1 record: header, IV, data, MAC, minimal padding (1..16)."""
    return 5 + 16 + plaintext + 20 + (16 - (plaintext + 20) % 16)


def test_coalescing_saves_one_record_of_overhead(server: BackgroundServer, separate_server: BackgroundServer) -> None:
    """Same page, same suite: the wire bytes are exactly one record (head + body) vs two."""
    wire, heads = {}, {}
    for name, srv in (("coalesced", server), ("separate", separate_server)):
        with RecordTap(srv.port) as tap:
            heads[name] = len(_split(_python_ssl_get_raw(tap.port, "/page30.bin"))[0])
        wire[name] = sum(5 + n for n in tap.app_records())
    head = heads["coalesced"]
    assert heads["separate"] == head
    assert wire["coalesced"] == _cbc_sha1_record(head + len(PAGE30))
    assert wire["separate"] == _cbc_sha1_record(head) + _cbc_sha1_record(len(PAGE30))
    assert wire["separate"] - wire["coalesced"] >= 5 + 16 + 20 - 15  # header, IV, MAC; padding may differ


@pytest.mark.parametrize("coalesce", [True, False], ids=["coalesced", "separate"])
def test_larger_file_records_are_full_and_body_exact(
    server: BackgroundServer, separate_server: BackgroundServer, coalesce: bool
) -> None:
    """Coalesced: the head fills the first record with file bytes, every record but the last is full.

    Separate: a head-only record, then the body from its first byte in full records
    (the split SSL splitting caches).
    """
    srv = server if coalesce else separate_server
    with RecordTap(srv.port) as tap:
        raw = _python_ssl_get_raw(tap.port, "/medium.bin")
    head, body = _split(raw)
    assert_equal = body == MEDIUM
    assert assert_equal, f"body differs: {len(body)} bytes, want {len(MEDIUM)}"
    records = tap.app_records()
    full = 16 + RECORD + 20 + 12  # IV + 16 KiB + HMAC-SHA1 + padding to the AES block
    if coalesce:
        assert len(records) == math.ceil((len(head) + len(MEDIUM)) / RECORD), records
        assert records[:-1] == [full] * (len(records) - 1)
    else:
        assert len(records) == 1 + math.ceil(len(MEDIUM) / RECORD), records
        assert records[0] < 16 + len(head) + 20 + 16 + 1
        assert records[1:-1] == [full] * (len(records) - 2)


def test_separate_records_large_file_is_byte_exact(separate_server: BackgroundServer, root: Path) -> None:
    want = hashlib.sha256((root / "big.bin").read_bytes()).hexdigest()
    (resp,) = fetch(separate_server, get("/big.bin"), keep_body=False)
    assert (resp.status, resp.body_sha256) == (200, want)


def test_keep_alive_mixed_responses_without_coalescing(separate_server: BackgroundServer) -> None:
    """404, HEAD, an empty-bodied 405 path and files on one connection, head and body written apart."""
    missing, head, page, post, again = fetch(
        separate_server, get("/nope"), get("/page30.bin", b"HEAD"), get("/page30.bin"),
        get("/page30.bin", b"POST", body=b"x"), get("/hello.txt"),
    )  # fmt: skip
    assert (missing.status, head.status, head.body, page.body) == (404, 200, b"", PAGE30)
    assert (post.status, again.body) == (405, b"hello, world\n")


@pytest.mark.parametrize(
    ("path", "status_line"),
    [
        ("/hello.txt", b"HTTP/1.1 200 OK"),
        ("/nope.txt", b"HTTP/1.1 404 Not Found"),
        ("/escape", b"HTTP/1.1 403 Forbidden"),
    ],
)
def test_status_line_has_the_standard_reason_phrase(server: BackgroundServer, path: str, status_line: bytes) -> None:
    """An empty reason phrase (``HTTP/1.1 200 ``) is legal but no server in the field sends one."""
    raw = _python_ssl_get_raw(server.port, path)
    assert raw.split(b"\r\n", 1)[0] == status_line
