"""The SSL-splitting proxy: untrusted, caching, invisible to the client (paper §3.2, §4.2).

For every client connection the proxy opens one connection to the splitting
server, relays the client's records to it verbatim, and turns the server's
messages back into TLS records (:class:`~sslsplit.splicer.Splicer`), taking
payloads from its cache hierarchy (:mod:`sslsplit.cache`).  The client talks
ordinary HTTPS and cannot tell the proxy is there -- except that any change
the proxy makes to a payload fails the record MAC.

Run ``python -m sslsplit.proxy --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tls12.errors import TLSError

from .aio import PayloadClient, serve_payloads
from .cache import CacheHierarchy, CacheMiss, DiskCache, LocalCache, MemoryCache
from .cli import close_servers, hostport, wait_for_signal
from .splicer import PayloadMismatch, Splicer
from .wire import Stub

__all__ = ["SplittingProxy", "ProxyStats", "main"]

logger = logging.getLogger("sslsplit.proxy")
READ_SIZE = 65536


@dataclass
class ProxyStats:
    connections: int = 0
    failed: int = 0
    bytes_from_server: int = 0
    bytes_to_client: int = 0
    bytes_from_client: int = 0


class SplittingProxy:
    """Accepts HTTPS clients and splices records from a splitting server's stubs and a cache."""

    DRAIN_GRACE = 2.0
    """Seconds one direction may keep flowing after the other ended."""

    def __init__(
        self,
        server: tuple[str, int],
        hierarchy: CacheHierarchy,
        *,
        rng: Callable[[int], bytes] = os.urandom,
        idle_timeout: float = 60.0,
    ) -> None:
        self.server = server
        self.hierarchy = hierarchy
        self.rng = rng
        self.idle_timeout = idle_timeout
        self.stats = ProxyStats()
        self._servers: list[asyncio.AbstractServer] = []
        self.port = 0
        self.cache_port = 0

    # --- override points (an adversarial proxy in the tests changes these) ----------

    async def payload_for(self, stub: Stub) -> bytes:
        """The payload a digest stub names, from the cache hierarchy."""
        return await self.hierarchy.get(stub.encoding, stub.ident)

    def record_for(self, splicer: Splicer, stub: Stub, payload: bytes) -> bytes:
        """The client record for a digest stub (the hierarchy already checked the payload's id)."""
        return splicer.rebuild(stub, payload, checked=True)

    # --- the two directions -------------------------------------------------------

    async def _client_to_server(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(READ_SIZE):
                self.stats.bytes_from_client += len(data)
                writer.write(data)  # client records are relayed verbatim
                await writer.drain()
        except (ConnectionResetError, BrokenPipeError):
            pass  # a client that resets after its last request is an ordinary end, not a failure
        _write_eof(writer)

    async def _server_to_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        splicer = Splicer(self.rng)
        while True:
            async with asyncio.timeout(self.idle_timeout):
                data = await reader.read(READ_SIZE)
            if not data:
                break
            self.stats.bytes_from_server += len(data)
            splicer.feed(data)
            out = bytearray()
            while (msg := splicer.next_message()) is not None:
                record = splicer.handle(msg)
                if record is None:
                    assert isinstance(msg, Stub)
                    record = self.record_for(splicer, msg, await self.payload_for(msg))
                out += record
            if out:
                self.stats.bytes_to_client += len(out)
                writer.write(bytes(out))
                try:
                    await writer.drain()
                except (ConnectionResetError, BrokenPipeError):
                    return  # the client went away

        _write_eof(writer)

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        server_writer: asyncio.StreamWriter | None = None
        tasks: list[asyncio.Task[None]] = []
        try:
            server_reader, server_writer = await asyncio.wait_for(asyncio.open_connection(*self.server), 10)
            up = asyncio.create_task(self._client_to_server(client_reader, server_writer))
            down = asyncio.create_task(self._server_to_client(server_reader, client_writer))
            tasks = [up, down]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            # Let the other direction drain briefly: e.g. the client's fatal alert after a bad
            # record still reaches the server, which logs why the client gave up.
            await asyncio.wait(tasks, timeout=self.DRAIN_GRACE)
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        except (TLSError, CacheMiss, PayloadMismatch, TimeoutError, ConnectionError, OSError) as exc:
            self.stats.failed += 1
            logger.warning("connection failed: %s: %s", type(exc).__name__, exc)
        except asyncio.CancelledError:
            pass  # the proxy is shutting down
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in (client_writer, server_writer):
                if w is not None:
                    w.close()

    async def start(self, host: str = "127.0.0.1", port: int = 0, cache_port: int | None = None) -> None:
        """Listen for clients; with ``cache_port`` also serve the local caches to other proxies."""
        server = await asyncio.start_server(self._handle, host, port)
        self._servers = [server]
        self.port = server.sockets[0].getsockname()[1]
        if cache_port is not None:
            peer = await serve_payloads(self.hierarchy.lookup_local, host, cache_port)
            self._servers.append(peer)
            self.cache_port = peer.sockets[0].getsockname()[1]

    async def close(self) -> None:
        await close_servers(self._servers)
        self._servers = []
        await self.hierarchy.close()


def _write_eof(writer: asyncio.StreamWriter) -> None:
    """Half-close: the peer learns that this direction ended (it may be gone already)."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sslsplit.proxy",
        description="SSL-splitting proxy: serves HTTPS clients from its cache; the origin sends only "
        "handshakes, MACs and payload ids. Clients need no change.",
    )
    p.add_argument("--server", required=True, type=hostport, help="splitting server HOST:PORT")
    p.add_argument("--store", required=True, type=hostport, help="the server's record store HOST:PORT (cache misses)")
    p.add_argument("--listen", type=hostport, default=("127.0.0.1", 4433), help="HOST:PORT for clients (default 127.0.0.1:4433)")
    p.add_argument("--memory-mb", type=float, default=256.0, help="memory cache size in MiB (default 256)")
    p.add_argument("--disk-cache", type=Path, help="directory of an on-disk cache level")
    p.add_argument("--peer", type=hostport, action="append", default=[], help="another proxy's cache HOST:PORT (repeatable)")
    p.add_argument("--serve-cache", type=int, metavar="PORT", help="serve this proxy's caches to peers on PORT")
    p.add_argument("-v", "--verbose", action="store_true", help="log every connection")
    return p


async def _run(args: argparse.Namespace) -> None:
    local: list[LocalCache] = [MemoryCache(int(args.memory_mb * (1 << 20)))]
    if args.disk_cache:
        local.append(DiskCache(args.disk_cache))
    remote = [PayloadClient(h, p, name=f"peer {h}:{p}") for h, p in args.peer]
    remote.append(PayloadClient(*args.store, name="origin"))
    proxy = SplittingProxy(args.server, CacheHierarchy(local, remote))
    await proxy.start(*args.listen, cache_port=args.serve_cache)
    print(f"splitting proxy on {args.listen[0]}:{proxy.port} -> server {args.server[0]}:{args.server[1]}", flush=True)
    await wait_for_signal()
    await proxy.close()
    s, h = proxy.stats, proxy.hierarchy.stats
    print(f"{s.connections} connections ({s.failed} failed); {s.bytes_from_server} B from server, "
          f"{s.bytes_to_client} B to clients; cache hits {h.hits}, poisoned {h.poisoned}, misses {h.misses}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    try:
        asyncio.run(_run(args))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
