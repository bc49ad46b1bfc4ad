"""How a proxied connection ends: the server's reset after its last message, and a reset inside one.

A scripted server on a plain socket stands in for the splitting server (the
proxy checks nothing in verbatim records, so it need not speak TLS): it sends
a digest stub, then -- while the proxy is still fetching that stub's payload
from a slow cache level -- the rest of its messages, and then resets the
connection (``SO_LINGER`` 0), as a server does that closes its socket with a
client's close_notify unread.  Everything the server sent before the reset is
part of the response and must reach the client, followed by an orderly FIN.
A reset that cuts a message in two is a failure the proxy counts.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from sslsplit.aio import BackgroundLoop
from sslsplit.aio.proxy import SplittingProxy
from sslsplit.cache import CacheHierarchy, MemoryCache
from sslsplit.wire import IDEncoding, Stub, Verbatim, payload_id, push_message

VERSION = 0x0303
PAYLOAD = os.urandom(3000)
STUB = push_message(Stub(0x17, VERSION, IDEncoding.DIGEST_SHA256, payload_id(IDEncoding.DIGEST_SHA256, PAYLOAD), b""))
# before any key-expose the proxy rebuilds a stub as a plaintext record: header || payload
STUB_RECORD = bytes((0x17, 3, 3)) + len(PAYLOAD).to_bytes(2, "big") + PAYLOAD
TAIL = push_message(Verbatim(0x17, VERSION, os.urandom(700))) + push_message(Verbatim(0x15, VERSION, os.urandom(26)))


class SlowCacheProxy(SplittingProxy):
    """A proxy whose cache answers after a delay (a far-away peer cache, say)."""

    DRAIN_GRACE = 0.2
    DELAY = 0.4

    async def payload_for(self, stub: Stub) -> bytes:
        await asyncio.sleep(self.DELAY)
        return await super().payload_for(stub)


class ScriptedServer:
    """Accepts one connection, reads the client's first bytes, sends ``parts`` with pauses, then resets."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(10)
        self.port = self.listener.getsockname()[1]
        self.received = b""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.settimeout(10)
            self.received = conn.recv(65536)
            for part in self.parts:
                conn.sendall(part)
                time.sleep(0.1)  # the proxy reads each part on its own, while it waits for the cache
            # SO_LINGER 0: closing sends a reset, as closing with a client's bytes unread does
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def close(self) -> None:
        self.thread.join(10)
        self.listener.close()


@pytest.fixture
def loop() -> Iterator[BackgroundLoop]:
    with BackgroundLoop() as background:
        yield background


def _proxy_in_front_of(loop: BackgroundLoop, server: ScriptedServer) -> SlowCacheProxy:
    cache = MemoryCache()
    cache.put(IDEncoding.DIGEST_SHA256, payload_id(IDEncoding.DIGEST_SHA256, PAYLOAD), PAYLOAD)
    proxy = SlowCacheProxy(("127.0.0.1", server.port), CacheHierarchy([cache]), idle_timeout=10.0)
    loop.run(proxy.start())
    return proxy


def _client_download(port: int) -> tuple[bytes, str]:
    """Send a few bytes, read to the end; returns what arrived and how the connection ended."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"\x17\x03\x03\x00\x02hi")
        got = bytearray()
        try:
            while data := s.recv(65536):
                got += data
        except ConnectionResetError:
            return bytes(got), "reset"
        return bytes(got), "eof"


def _wait_finished(proxy: SplittingProxy, expect_failed: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while proxy.stats.failed < expect_failed and time.monotonic() < deadline:
        time.sleep(0.01)


def test_reset_after_last_message_still_delivers_everything(loop: BackgroundLoop) -> None:
    server = ScriptedServer([STUB, TAIL])
    proxy = _proxy_in_front_of(loop, server)
    try:
        got, ending = _client_download(proxy.port)
    finally:
        server.close()
        loop.run(proxy.close())
    assert server.received == b"\x17\x03\x03\x00\x02hi"  # client bytes went through verbatim
    assert got == STUB_RECORD + TAIL
    assert ending == "eof"
    assert proxy.stats.failed == 0


def test_reset_inside_a_message_fails_after_the_whole_messages(loop: BackgroundLoop) -> None:
    cut = len(TAIL) - 10  # the last message loses its end
    server = ScriptedServer([STUB, TAIL[:cut]])
    proxy = _proxy_in_front_of(loop, server)
    try:
        got, _ = _client_download(proxy.port)
        _wait_finished(proxy, 1)
    finally:
        server.close()
        loop.run(proxy.close())
    first_record = len(TAIL) - (5 + 26)
    assert got == STUB_RECORD + TAIL[:first_record]  # whole messages only, never a fragment
    assert proxy.stats.failed == 1
