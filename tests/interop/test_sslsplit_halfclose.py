"""A client that half-closes right after its request still gets the whole response through the proxy.

Python's ``ssl`` (an ``SSLObject`` over a plain socket) sends the request
and, once the origin has committed the response (it has written all of it to
the proxy), close_notify and a TCP half-close (``shutdown(SHUT_WR)``); then it
reads the response to its end.  (Together with the request would be too
early: a TLS 1.2 server answers a close_notify with its own and may drop
pending writes, RFC 5246 §7.2.1, and ``tls12`` does.)  The proxy must go on
relaying the committed response for as long as the origin sends it -- not for
a grace period after the client's EOF.  The proxy's cache level answers after
a delay (a far-away peer cache) and its grace period is shortened, so that
the response takes several grace periods to relay.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sslsplit.aio.proxy import SplittingProxy
from sslsplit.wire import Stub
from tests.interop.split_fixtures import SplitSetup, split_setup
from tests.interop.tls_peers import (
    MIB,
    assert_same_bytes,
    make_docroot,
    python_ssl_context,
    split_http_response,
)
from tls12.certs import Credentials
from tls12.suites import CipherSuite

pytestmark = pytest.mark.interop

MODES = {
    "null": CipherSuite.TLS_RSA_WITH_NULL_SHA,
    "key-expose": CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
}


class SlowCacheProxy(SplittingProxy):
    """64 payloads x 10 ms: relaying 1 MiB takes about three grace periods."""

    DRAIN_GRACE = 0.2

    async def payload_for(self, stub: Stub) -> bytes:
        await asyncio.sleep(0.01)
        return await super().payload_for(stub)


def half_close_get(port: int, path: str, suite: CipherSuite, committed: Callable[[], bool]) -> tuple[bytes, bool]:
    """Request; close_notify and TCP half-close once ``committed()``: ``(response, ended by close_notify)``."""
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = python_ssl_context(suite).wrap_bio(inc, out)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(out.read())
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("closed during the handshake") from None
                inc.write(data)
        tls.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        sock.sendall(out.read())
        deadline = time.monotonic() + 10
        while not committed():
            assert time.monotonic() < deadline, "the origin never answered"
            time.sleep(0.005)
        try:
            tls.unwrap()  # queues close_notify; the server's comes at the end of the response
        except ssl.SSLWantReadError:
            pass
        sock.sendall(out.read())
        sock.shutdown(socket.SHUT_WR)
        response = bytearray()
        while data := sock.recv(65536):
            inc.write(data)
            while True:
                try:
                    chunk = tls.read(65536)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    return bytes(response), True
                response += chunk
        return bytes(response), False


@pytest.fixture(scope="module")
def half_docroot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    root = tmp_path_factory.mktemp("halfwww")
    return root, make_docroot(root, [MIB])[MIB]


@pytest.fixture(scope="module")
def split(credentials: Credentials, half_docroot: tuple[Path, bytes]) -> Iterator[SplitSetup]:
    with split_setup(half_docroot[0], credentials) as setup:
        yield setup


@pytest.mark.parametrize("mode", list(MODES))
def test_half_closed_client_gets_the_whole_response(split: SplitSetup, half_docroot: tuple[Path, bytes], mode: str) -> None:
    proxy = split.proxy(cls=SlowCacheProxy)
    before = split.server.stats.requests
    response, clean = half_close_get(
        proxy.port, f"/file_{MIB}.bin", MODES[mode], lambda: split.server.stats.requests > before
    )
    status, _, body = split_http_response(response)
    assert status == 200
    assert_same_bytes(body, half_docroot[1])
    assert clean  # ended by the server's close_notify, relayed by the proxy
    assert proxy.stats.failed == 0
