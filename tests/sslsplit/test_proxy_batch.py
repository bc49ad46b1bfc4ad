"""The proxy's batch path on sockets: the client gets the per-record path's bytes, endings included.

A scripted server (:mod:`tests.sslsplit.test_proxy_endings`) sends a stream of stubs in parts and
then resets the connection.  A plain :class:`SplittingProxy` splices it in runs
(:class:`~sslsplit.splicer.PayloadsNeeded`); a subclass that overrides ``payload_for`` gets the
per-record path.  With the same seeded ``rng`` both must send the client the same bytes.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Iterator

import pytest

from sslsplit.aio import BackgroundLoop
from sslsplit.aio.proxy import BATCH, SplittingProxy
from sslsplit.cache import CacheHierarchy, MemoryCache
from sslsplit.splicer import Splicer
from sslsplit.wire import IDEncoding, KeyExpose, Stub, Verbatim, payload_id, push_message
from tests.sslsplit.test_proxy_endings import (
    PAYLOAD,
    STUB,
    STUB_RECORD,
    TAIL,
    VERSION,
    ScriptedServer,
    _client_download,
    _wait_finished,
)

PAYLOADS = [random.Random(i).randbytes(random.Random(-i).randrange(1, 1 << 14)) for i in range(80)]
KEYS = [(IDEncoding.DIGEST_SHA256, payload_id(IDEncoding.DIGEST_SHA256, p)) for p in PAYLOADS]
ORIGIN = {payload_id(IDEncoding.DIGEST_SHA256, p): p for p in [*PAYLOADS, PAYLOAD]}


def _stream(count: int = len(KEYS)) -> bytes:
    """A key-expose, then ``count`` digest stubs (the payloads in turn) with verbatim records
    among them: more than two runs."""
    parts = [push_message(Verbatim(0x16, VERSION, b"handshake")), push_message(KeyExpose(VERSION, b"k" * 16, b"i" * 16))]
    for i in range(count):
        encoding, ident = KEYS[i % len(KEYS)]
        parts.append(push_message(Stub(0x17, VERSION, encoding, ident, random.Random(i).randbytes(20))))
        if i % 7 == 3:
            parts.append(push_message(Verbatim(0x17, VERSION, b"v" * i)))
    return b"".join(parts)


class PerRecordProxy(SplittingProxy):
    """Overrides a per-stub hook (as the adversarial proxies of the tests do): the per-record path."""

    async def payload_for(self, stub: Stub) -> bytes:
        return await super().payload_for(stub)


class SlowSource:
    """A remote level that answers after a delay (a far-away peer), so a run waits on a miss."""

    name = "slow"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.fetches = 0

    async def fetch(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        self.fetches += 1
        await asyncio.sleep(self.delay)
        return ORIGIN.get(ident)

    async def close(self) -> None:
        pass


@pytest.fixture
def loop() -> Iterator[BackgroundLoop]:
    with BackgroundLoop() as background:
        yield background


def test_which_path_a_proxy_takes() -> None:
    hierarchy = CacheHierarchy([MemoryCache()])
    assert SplittingProxy(("127.0.0.1", 9), hierarchy).batched
    assert SplittingProxy(("127.0.0.1", 9), hierarchy).new_splicer()._batch == BATCH

    class RecordHook(SplittingProxy):
        def record_for(self, splicer: Splicer, stub: Stub, payload: bytes) -> bytes:
            return super().record_for(splicer, stub, payload)

    for cls in (PerRecordProxy, RecordHook):
        proxy = cls(("127.0.0.1", 9), hierarchy)
        assert not proxy.batched and proxy.new_splicer()._batch == 0


def _through(loop: BackgroundLoop, cls: type[SplittingProxy], parts: list[bytes], *, warm: bool) -> tuple[bytes, str, SplittingProxy]:
    memory = MemoryCache()
    if warm:
        for (encoding, ident), payload in zip(KEYS, PAYLOADS, strict=True):
            memory.put(encoding, ident, payload)
    source = SlowSource(0.002)
    server = ScriptedServer(parts)
    proxy = cls(("127.0.0.1", server.port), CacheHierarchy([memory], [source]), rng=random.Random(5).randbytes,
                idle_timeout=10.0)
    loop.run(proxy.start())
    try:
        got, ending = _client_download(proxy.port)
        _wait_finished(proxy, 0)
    finally:
        server.close()
        loop.run(proxy.close())
    return got, ending, proxy


@pytest.mark.parametrize("warm", [True, False])
def test_batched_and_per_record_proxies_send_the_same_bytes(loop: BackgroundLoop, warm: bool) -> None:
    stream = _stream()
    parts = [stream[: len(stream) // 3], stream[len(stream) // 3 : -40], stream[-40:]]  # cut inside messages
    got, ending, proxy = _through(loop, SplittingProxy, parts, warm=warm)
    want, want_ending, reference = _through(loop, PerRecordProxy, parts, warm=warm)
    assert ending == want_ending == "eof"
    assert got == want and len(got) > sum(map(len, PAYLOADS))
    assert proxy.stats.failed == reference.stats.failed == 0
    assert proxy.stats.bytes_to_client == reference.stats.bytes_to_client == len(got)
    assert proxy.hierarchy.stats == reference.hierarchy.stats


def test_batched_proxy_reset_after_last_message_still_delivers_everything(loop: BackgroundLoop) -> None:
    """test_proxy_endings' scenario on the batch path: the stub's payload comes from a slow remote
    level while the rest of the stream arrives and the server resets."""
    got, ending, proxy = _through(loop, SplittingProxy, [STUB, TAIL], warm=False)
    assert got == STUB_RECORD + TAIL and ending == "eof" and proxy.stats.failed == 0


def test_batched_proxy_reset_inside_a_message_fails_after_the_whole_messages(loop: BackgroundLoop) -> None:
    cut = len(TAIL) - 10
    server = ScriptedServer([STUB, TAIL[:cut]])
    proxy = SplittingProxy(("127.0.0.1", server.port), CacheHierarchy([MemoryCache()], [SlowSource(0.3)]),
                           idle_timeout=10.0)
    proxy.DRAIN_GRACE = 0.2
    loop.run(proxy.start())
    try:
        got, _ = _client_download(proxy.port)
        _wait_finished(proxy, 1)
    finally:
        server.close()
        loop.run(proxy.close())
    assert got == STUB_RECORD + TAIL[: len(TAIL) - (5 + 26)]  # whole messages only
    assert proxy.stats.failed == 1


class UvloopBackground(BackgroundLoop):
    """A :class:`BackgroundLoop` on uvloop's event loop."""

    def __init__(self) -> None:
        import uvloop  # the fast extra, installed by make build
        super().__init__()
        self.loop.close()
        self.loop = uvloop.new_event_loop()


def _slow_download(port: int) -> bytes:
    """A client with a small receive buffer that waits before it reads: once the kernel holds
    all it takes (megabytes on loopback), the proxy's writes stall, so a transport holds what it
    has not sent while the next runs are built."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(b"\x17\x03\x03\x00\x02hi")
        time.sleep(0.5)
        got = bytearray()
        while data := s.recv(65536):
            got += data
        return bytes(got)


def test_uvloop_transport_keeps_the_view_and_the_bytes_stay_right() -> None:
    """uvloop's transport keeps the memoryview it could not send yet (asyncio's copies it); the
    splicer must then leave that buffer alone.  Same bytes as the per-record path on asyncio."""
    stream = _stream(800)  # about 6.5 MB of records: more than loopback's socket buffers hold
    results = []
    for background, cls in ((UvloopBackground(), SplittingProxy), (BackgroundLoop(), PerRecordProxy)):
        with background as loop:
            memory = MemoryCache()
            for (encoding, ident), payload in zip(KEYS, PAYLOADS, strict=True):
                memory.put(encoding, ident, payload)
            server = ScriptedServer([stream])
            proxy = cls(("127.0.0.1", server.port), CacheHierarchy([memory]), rng=random.Random(5).randbytes,
                        idle_timeout=10.0)
            loop.run(proxy.start())
            try:
                results.append(_slow_download(proxy.port))
            finally:
                server.close()
                loop.run(proxy.close())
    assert results[0] == results[1] and len(results[0]) > 10 * sum(map(len, PAYLOADS))
