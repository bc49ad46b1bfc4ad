"""An SSL-splitting server and proxy on loopback, in a background event loop, for interop tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sslsplit.aio import BackgroundLoop, PayloadClient
from sslsplit.aio.proxy import SplittingProxy
from sslsplit.aio.server import SplittingServer
from sslsplit.cache import CacheHierarchy, LocalCache, MemoryCache
from tls12.certs import Credentials


class SplitSetup:
    """A running splitting server (+ record store) and a factory for proxies in front of it."""

    def __init__(self, loop: BackgroundLoop, server: SplittingServer) -> None:
        self.loop = loop
        self.server = server
        self.proxies: list[SplittingProxy] = []

    def proxy(self, local: list[LocalCache] | None = None, cls: type[SplittingProxy] = SplittingProxy) -> SplittingProxy:
        hierarchy = CacheHierarchy(
            local if local is not None else [MemoryCache()],
            [PayloadClient("127.0.0.1", self.server.store_port, name="origin")],
        )
        proxy = cls(("127.0.0.1", self.server.port), hierarchy, idle_timeout=30.0)

        async def start() -> None:
            await proxy.start()

        self.loop.run(start())
        self.proxies.append(proxy)
        return proxy

    def wait_closed(self, connections: int, timeout: float = 10.0) -> None:
        """Wait until the server has seen ``connections`` connections end (byte counts are final then)."""
        deadline = time.monotonic() + timeout
        while self.server.totals.connections < connections:
            if time.monotonic() > deadline:
                raise AssertionError(f"server saw {self.server.totals.connections} of {connections} connections end")
            time.sleep(0.01)

    def measure(self, download) -> int:  # noqa: ANN001 - any zero-argument callable
        """Bytes the origin sent (stubs + cache-miss payloads) while ``download()`` ran."""
        done = self.server.totals.connections
        before = self.server.bytes_sent
        download()
        self.wait_closed(done + 1)
        return self.server.bytes_sent - before


@contextmanager
def split_setup(root: Path, credentials: Credentials, mode: str = "auto") -> Iterator[SplitSetup]:
    with BackgroundLoop() as loop:
        server = SplittingServer(root, credentials, mode=mode, idle_timeout=30.0)
        loop.run(server.start())
        setup = SplitSetup(loop, server)
        try:
            yield setup
        finally:
            for proxy in setup.proxies:
                loop.run(proxy.close())
            loop.run(server.close())
