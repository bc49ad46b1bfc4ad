"""The loopback testbed behind :mod:`sslsplit.experiments`: the paper's three servers and a proxy.

A :class:`Testbed` runs, in a background event loop, the three servers the paper compares -- a
plain HTTP server, the HTTPS server of :mod:`testbed.apps.server` and the SSL-splitting server
-- over one document root, and makes proxies on demand. :meth:`Testbed.download` fetches a path
with a real, unmodified client (Python's ``http.client`` over ``ssl``) and returns the bytes
**the origin sent** for it, counted on the origin's sockets as the paper counted bytes on the
server's interface: for splitting, stubs to the proxy plus any payloads the proxy fetched on a
cache miss. The HTTP layer is the same code for all three servers, so differences come from
the protocols alone.
"""

from __future__ import annotations

import asyncio
import http.client
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.apps.file_handler import HTTPFileHandler
from testbed.apps.server import start_server
from testbed.apps.stats import ServerStats
from tls12.certs import Credentials, generate_self_signed
from tls12.config import ServerConfig
from tls12.suites import SUITES, CipherSuite

from ..cache import CacheHierarchy, MemoryCache
from .payloads import BackgroundLoop, PayloadClient
from .proxy import SplittingProxy
from .server import SplittingServer

__all__ = ["Testbed", "Download", "PlainStream"]


class PlainStream:
    """A TCP stream with the interface the HTTP layer expects of a TLS stream (the HTTP baseline)."""

    handshake = None
    error = None

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.bytes_in = 0
        self.bytes_out = 0
        self.alerts: list[Any] = []
        self.app_data: dict[str, object] = {}
        self.peername = writer.get_extra_info("peername")

    async def read(self, max_bytes: int = 65536) -> bytes:
        data = await self.reader.read(max_bytes)
        self.bytes_in += len(data)
        return data

    def write(self, data: bytes) -> None:
        self.bytes_out += len(data)
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()


@dataclass(frozen=True)
class Download:
    """One GET on a new connection: body bytes received, bytes the origin sent, wall time."""

    protocol: str
    path: str
    body_bytes: int
    server_bytes: int
    seconds: float


class Testbed:
    """HTTP, HTTPS and SSL-splitting servers over ``root`` on loopback, in a background loop."""

    def __init__(
        self,
        root: str | Path,
        credentials: Credentials | None = None,
        suite: CipherSuite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
    ) -> None:
        self.root = Path(root)
        self.credentials = credentials or generate_self_signed()
        self.suite = suite
        self.loop = BackgroundLoop()
        self.http_stats = ServerStats()
        self.https_stats = ServerStats()
        self.split = SplittingServer(self.root, self.credentials, mode="auto", session_cache=False)
        self.http_port = self.https_port = 0
        self.http_closed = 0
        self._servers: list[asyncio.AbstractServer] = []
        self.proxy: SplittingProxy | None = None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        params = SUITES[suite]
        ctx.set_ciphers(params.openssl_name + (":@SECLEVEL=0" if params.cipher == "null" else ""))
        self.client_context = ctx

    async def _start(self) -> None:
        stats = self.http_stats

        async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            stream = PlainStream(reader, writer)
            try:
                await HTTPFileHandler(stream, self.root.resolve(), stats, 30.0).run()  # type: ignore[arg-type]  # PlainStream has the TLSStream methods the handler uses
            finally:
                writer.close()
                stats.bytes_out += stream.bytes_out
                stats.bytes_in += stream.bytes_in
                self.http_closed += 1

        http_server = await asyncio.start_server(plain, "127.0.0.1", 0)
        https_server = await start_server(
            self.root, "127.0.0.1", 0, ServerConfig(credentials=self.credentials, cipher_suites=(self.suite,)),
            stats=self.https_stats,
        )
        await self.split.start()
        self._servers = [http_server, https_server]
        self.http_port = http_server.sockets[0].getsockname()[1]
        self.https_port = https_server.sockets[0].getsockname()[1]

    def start(self) -> Testbed:
        self.loop.start()
        self.loop.run(self._start())
        self.new_proxy()
        return self

    def new_proxy(self) -> SplittingProxy:
        """Replace the proxy by one with an empty (cold) cache."""

        async def make() -> SplittingProxy:
            if self.proxy is not None:
                await self.proxy.close()
            hierarchy = CacheHierarchy([MemoryCache(4 << 30)], [PayloadClient("127.0.0.1", self.split.store_port, name="origin")])
            proxy = SplittingProxy(("127.0.0.1", self.split.port), hierarchy)
            await proxy.start()
            return proxy

        self.proxy = self.loop.run(make())
        return self.proxy

    def stop(self) -> None:
        async def close() -> None:
            if self.proxy is not None:
                await self.proxy.close()
            for s in self._servers:
                s.close()
                await s.wait_closed()
            await self.split.close()

        try:
            self.loop.run(close())
        finally:
            self.loop.stop()

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- measuring -----------------------------------------------------------------

    def _counter(self, protocol: str) -> Callable[[], int]:
        if protocol == "http":
            return lambda: self.http_stats.bytes_out
        if protocol == "https":
            return lambda: self.https_stats.bytes_out
        return lambda: self.split.bytes_sent

    def _closed(self, protocol: str) -> Callable[[], int]:
        if protocol == "http":
            return lambda: self.http_closed
        if protocol == "https":
            return lambda: len(self.https_stats.connections)
        return lambda: self.split.totals.connections

    def download(self, protocol: str, path: str, timeout: float = 120.0) -> Download:
        """GET ``path`` with one new connection; ``protocol`` is http, https or split."""
        if protocol not in ("http", "https", "split"):
            raise ValueError(f"protocol must be http, https or split, not {protocol!r}")
        counter = self._counter(protocol)
        before = counter()
        closed_before = self._closed(protocol)()
        t0 = time.perf_counter()
        if protocol == "http":
            conn: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=timeout)
        else:
            port = self.https_port if protocol == "https" else self.proxy.port  # type: ignore[union-attr]  # protocol "split" runs only with a proxy started
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=self.client_context)
        try:
            conn.request("GET", path, headers={"Connection": "close"})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{protocol} GET {path}: HTTP {resp.status}")
        finally:
            conn.close()
        seconds = time.perf_counter() - t0
        # byte counters are final once the server has seen the connection end
        deadline = time.monotonic() + 10
        while self._closed(protocol)() == closed_before and time.monotonic() < deadline:
            time.sleep(0.002)
        return Download(protocol, path, len(body), counter() - before, seconds)
