"""The HTTPS file server's callback path (:meth:`HTTPFileHandler._fast`) against its h11 path.

The callback path answers plain keep-alive GETs and HEADs of small files inside the transport's
callback, without h11; it must write what the h11 path writes, byte for byte, and hand
everything else to h11 untouched.  Checked three ways: the same requests to a server on the
transport-level adapter (callback path on) and to one on the stream adapter (h11 only),
responses compared byte for byte, record lengths too, with a count of which requests the
callback path took; Hypothesis over request heads (whatever the callback path accepts, h11
parses the same way, as a keep-alive HTTP/1.1 request) and over response heads (the same bytes
as h11's); the idle timeout still closes idle connections and never active ones; and curl.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import h11
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from testbed.apps import file_handler
from testbed.apps.file_handler import HTTPFileHandler, _response_head
from testbed.apps.harness import BackgroundServer
from testbed.apps.server import start_server
from testbed.apps.stats import ServerStats
from tls12 import ClientConfig, ServerConfig
from tls12.aio import TLSStream, connect, serve
from tls12.suites import CipherSuite
from tls12.testing import credentials

SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("fast")
    www = base / "www"
    (www / "sub").mkdir(parents=True)
    (www / "hello.txt").write_bytes(b"hello, world\n")
    (www / "empty.bin").write_bytes(b"")
    (www / "page.html").write_bytes(b"<p>" + b"x" * 1000 + b"</p>")
    (www / "big.bin").write_bytes(os.urandom(300_000))  # more than one write: h11's path
    (www / "sub" / "index.html").write_bytes(b"<p>index</p>\n")
    (base / "secret.txt").write_bytes(b"outside the root\n")
    (www / "escape").symlink_to(base / "secret.txt")
    (www / "inside").symlink_to(www / "hello.txt")
    os.mkfifo(www / "fifo")
    return www


def _config() -> ServerConfig:
    return ServerConfig(credentials=credentials(), cipher_suites=(SUITE,))


REQUESTS = [
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"HEAD /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /empty.bin HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /page.html HTTP/1.1\r\nHost: x\r\nUser-Agent: t/1\r\nAccept: */*\r\n\r\n",
    b"GET /hello.txt?q=1 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /%68ello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /sub/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /sub/index.html HTTP/1.1\r\nHost:   x  \r\n\r\n",
    b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /escape HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /inside HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /fifo HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n\r\n",
]
"""One connection each, then ``GET /hello.txt`` again on it (if still open)."""

LAST = [
    b"GET /hello.txt HTTP/1.0\r\n\r\n",
    b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
]
"""Requests after which the server closes."""


async def _exchange(port: int, requests: list[bytes]) -> tuple[bytes, list[int]]:
    """Send the requests one at a time on one connection: everything received, and how many
    bytes the server put on the wire (so that the same records, not just the same plaintext)."""
    client = await connect("127.0.0.1", port, ClientConfig(server_name="localhost", cipher_suites=(SUITE,)))
    out = bytearray()
    for request in requests:
        if client.at_eof or client.conn.closed:
            break  # the server closed after the previous response
        client.write(request)
        await client.drain()
        try:
            async with asyncio.timeout(0.3):  # a response is whole once nothing more comes
                while chunk := await client.read():
                    out += chunk
        except TimeoutError:
            pass
    bytes_in = client.bytes_in
    await client.close()
    return bytes(out), [bytes_in]


async def _both(root: Path, coalesce: bool, requests: list[bytes]) -> tuple[bytes, bytes, list[int], list[int]]:
    async def slow(stream: TLSStream) -> None:
        await HTTPFileHandler(stream, root.resolve(), ServerStats(), 5.0, coalesce=coalesce).run()

    h11_only = await serve(slow, "127.0.0.1", 0, _config())
    fast = await start_server(root, "127.0.0.1", 0, _config(), coalesce=coalesce)
    async with h11_only, fast:
        a, wire_a = await _exchange(fast.sockets[0].getsockname()[1], requests)
        b, wire_b = await _exchange(h11_only.sockets[0].getsockname()[1], requests)
    return a, b, wire_a, wire_b


@pytest.fixture
def fast_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    calls: list[bool] = []
    original = HTTPFileHandler._fast

    def counting(self: HTTPFileHandler, data: bytes) -> bool:
        answered = original(self, data)
        calls.append(answered)
        return answered

    monkeypatch.setattr(HTTPFileHandler, "_fast", counting)
    yield calls


@pytest.mark.parametrize("coalesce", [True, False], ids=["coalesced", "separate-head"])
@pytest.mark.parametrize("request_", REQUESTS + LAST, ids=lambda r: r.split(b"\r\n")[0].decode() + f" {len(r)}")
def test_callback_path_writes_what_h11_writes(root: Path, request_: bytes, coalesce: bool, fast_calls: list[bool]) -> None:
    follow = [] if request_ in LAST else [b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n"]
    fast, slow, wire_fast, wire_slow = asyncio.run(_both(root, coalesce, [request_, *follow]))
    assert fast == slow
    assert wire_fast == wire_slow  # the same records on the wire, byte counts included
    assert fast.startswith(b"HTTP/1.")


def test_the_callback_path_takes_exactly_the_plain_requests(root: Path, fast_calls: list[bool]) -> None:
    plain = REQUESTS[:8]  # regular files under the root, reached without a symlink; a query,
    asyncio.run(_both(root, True, plain))  # a %-escape and a directory's index.html included
    assert fast_calls.count(True) == len(plain)
    fast_calls.clear()
    for request in REQUESTS[8:] + LAST:
        asyncio.run(_both(root, True, [request]))
    assert True not in fast_calls, "the callback path answered a request h11 must see"


def test_idle_timeout_closes_idle_connections_not_busy_ones(root: Path) -> None:
    async def main() -> tuple[bool, float]:
        server = await start_server(root, "127.0.0.1", 0, _config(), idle_timeout=0.5)
        async with server:
            client = await connect("127.0.0.1", server.sockets[0].getsockname()[1],
                                   ClientConfig(server_name="localhost", cipher_suites=(SUITE,)))
            loop = asyncio.get_running_loop()
            start = loop.time()
            open_while_busy = True
            while open_while_busy and loop.time() - start < 1.5:  # busy for three idle timeouts
                client.write(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
                response = b""
                while not response.endswith(b"hello, world\n"):
                    chunk = await client.read()
                    if not chunk:
                        open_while_busy = False  # closed by the server while in use
                        break
                    response += chunk
                await asyncio.sleep(0.2)
            open_while_busy = open_while_busy and not client.at_eof
            if not open_while_busy:
                return False, 0.0
            idle_from = loop.time()
            async with asyncio.timeout(5):
                while await client.read():
                    pass
            return open_while_busy, loop.time() - idle_from

    open_while_busy, closed_after = asyncio.run(main())
    assert open_while_busy
    assert 0.2 <= closed_after < 2.0


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from([b"GET", b"HEAD", b"POST", b"get"]),
    target=st.binary(min_size=0, max_size=12),
    version=st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"http/1.1"]),
    headers=st.lists(st.tuples(
        st.sampled_from([b"Host", b"host", b"HOST", b"Connection", b"Content-Length", b"Transfer-Encoding",
                         b"X-A", b"Accept", b"Expect", b"Upgrade", b"Bad Name", b""]),
        st.sampled_from([b":", b": ", b":\t", b" :"]),
        st.binary(max_size=8),
    ), max_size=4),
    end=st.sampled_from([b"\r\n", b"\n"]),
)
# one request the fast path accepts, so that the comparison below runs in every run (random
# binary targets rarely make one)
@example(method=b"GET", target=b"/f", version=b"HTTP/1.1", headers=[(b"Host", b": ", b"x")], end=b"\r\n")
def test_what_the_callback_path_accepts_h11_parses_alike(method: bytes, target: bytes, version: bytes,
                                                        headers: list[tuple[bytes, bytes, bytes]], end: bytes) -> None:
    head = method + b" " + target + b" " + version + end
    head += b"".join(name + sep + value + end for name, sep, value in headers) + end
    m = file_handler._FAST_REQUEST.fullmatch(head)
    if m is None:
        return
    names = [line[: line.index(b":")].lower() for line in m.group(3).split(b"\r\n")[:-1]]
    if names.count(b"host") != 1 or set(names) & file_handler._SLOW_HEADERS:
        return
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(head)
    event = conn.next_event()
    assert isinstance(event, h11.Request), event
    assert (event.method, event.target, event.http_version) == (m.group(1), m.group(2), b"1.1")
    assert isinstance(conn.next_event(), h11.EndOfMessage)  # no body
    assert conn.next_event() is h11.NEED_DATA  # nothing left over
    conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
    conn.send(h11.EndOfMessage())
    assert conn.our_state is h11.DONE and conn.their_state is h11.DONE  # keep-alive, not MUST_CLOSE


@settings(max_examples=100, deadline=None)
@given(size=st.integers(0, 1 << 40), ctype=st.sampled_from(["text/plain", "application/octet-stream",
                                                             "text/html; charset=utf-8", "image/png"]))
def test_response_head_is_h11s(size: int, ctype: str) -> None:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.next_event()
    h11_head = conn.send(h11.Response(status_code=200, headers=HTTPFileHandler._headers(size, ctype), reason=b"OK"))
    assert _response_head(size, ctype) == h11_head


@pytest.mark.interop
def test_curl_keep_alive_through_the_callback_path(root: Path, fast_calls: list[bool]) -> None:
    config = ServerConfig(credentials=credentials(), cipher_suites=(SUITE,))
    with BackgroundServer(root, config) as server:
        urls = [f"{server.url}/hello.txt", f"{server.url}/page.html", f"{server.url}/hello.txt"]
        proc = subprocess.run(["curl", "--silent", "--show-error", "--insecure", "--ciphers", "AES128-SHA", *urls],
                              capture_output=True, timeout=60)
        server.wait_idle()
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == (root / "hello.txt").read_bytes() + (root / "page.html").read_bytes() * 1 \
            + (root / "hello.txt").read_bytes()
        assert server.stats.connections[-1].requests == 3  # one keep-alive connection
    assert fast_calls.count(True) >= 2  # curl's later requests arrive while the handler waits


def test_the_callback_path_leaves_a_paused_transport_to_h11(root: Path) -> None:
    """Above the high-water mark the callback path answers nothing: h11's path waits in drain()."""
    from tls12 import ServerConnection
    from tls12.aio import TLSProtocol

    async def main() -> bool:
        proto = TLSProtocol(ServerConnection(_config()))
        handler = HTTPFileHandler(proto, root.resolve(), ServerStats(), 5.0)
        handler._parked = True
        proto._write_paused = True
        return handler._fast(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")

    assert asyncio.run(main()) is False
