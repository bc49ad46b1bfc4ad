"""Taps between an SSL-splitting proxy and its origin: every byte recorded, client records rewritable.

In SSL splitting the proxy is the adversary.  A :class:`Tap` is a TCP relay
that sits on the proxy's side of the proxy--origin link, so it sees exactly
what a proxy sees: the origin's stubs, MACs and key-expose messages on the way
down, the client's TLS records on the way up.  It is used two ways:

* **recording** -- every byte the origin sends towards proxies is kept per
  connection (``TapConnection.down``), on the splitting port and on the record
  store port (cache misses), so a test can search it for key material;
* **forging** -- a ``rewrite`` callback gets each whole TLS record the client
  sends and returns the bytes to forward instead: the tap then *is* a
  malicious proxy in the client-to-server direction, holding everything a
  real proxy holds (the exposed server-write key included) and nothing more.

:class:`KeyRecordingServer` is the origin with one addition for the tests:
it keeps its sans-IO connection objects, so a test can export each one's real
key block with :func:`tls12.state.export_connection` after it ended.
The relay runs on a :class:`sslsplit.aio.BackgroundLoop`; everything here
listens on loopback only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sslsplit.aio import BackgroundLoop, PayloadClient
from sslsplit.aio.proxy import SplittingProxy
from sslsplit.aio.server import SplittingServer
from sslsplit.cache import CacheHierarchy, MemoryCache
from sslsplit.wire import Message, MessageReader
from tls12 import ServerConnection
from tls12.config import ServerConfig
from tls12.state import export_connection

__all__ = [
    "TapConnection", "Tap", "Rewriter", "KeyRecordingServer", "TappedProxy", "tapped_proxy", "close_tapped", "split_records",
]

READ_SIZE = 65536


@dataclass
class TapConnection:
    """One relayed connection: the bytes in each direction as they were forwarded."""

    down: bytearray = field(default_factory=bytearray)
    """Everything the origin sent towards the proxy."""
    up: bytearray = field(default_factory=bytearray)
    """Everything forwarded to the origin (after any rewrite)."""
    local_port: int = 0
    """The tap's own port towards the origin: the peer port the origin logs for this connection."""
    origin_closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the origin ended its direction (EOF or reset)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Scratch space for a rewrite callback (what it saw, what it forged)."""

    def messages(self, *, complete: bool = True) -> list[Message]:
        """The origin's bytes cut into splitting-protocol messages (stubs, key-expose, verbatim).

        With ``complete`` (after the connection ended) a trailing partial message is an error;
        without it (while the connection runs) it is simply not returned yet.
        """
        reader = MessageReader()
        reader.feed(bytes(self.down))
        out = []
        while (msg := reader.next_message()) is not None:
            out.append(msg)
        assert not complete or reader.buffered == 0, "the origin's stream ended inside a message"
        return out


Rewriter = Callable[[TapConnection, bytes], bytes]
"""``rewrite(connection, record) -> bytes to forward``: one whole TLS record from the client."""


def split_records(buffer: bytearray) -> list[bytes]:
    """Remove and return the whole TLS records (5-byte header + fragment) at the front of ``buffer``."""
    records = []
    while len(buffer) >= 5:
        end = 5 + int.from_bytes(buffer[3:5], "big")
        if len(buffer) < end:
            break
        records.append(bytes(buffer[:end]))
        del buffer[:end]
    return records


class Tap:
    """A loopback TCP relay in front of ``target`` (an origin port), on the caller's event loop."""

    def __init__(self, target: tuple[str, int], rewrite: Rewriter | None = None) -> None:
        self.target = target
        self.rewrite = rewrite
        self.connections: list[TapConnection] = []
        self.errors: list[BaseException] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def bytes_down(self) -> int:
        """Bytes the origin sent through this tap, over all connections."""
        return sum(len(c.down) for c in self.connections)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = TapConnection()
        self.connections.append(conn)
        up_writer: asyncio.StreamWriter | None = None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            conn.local_port = up_writer.get_extra_info("sockname")[1]
            await asyncio.gather(self._up(conn, reader, up_writer), self._down(conn, up_reader, writer))
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a bug in a rewrite callback must fail the test, not hang it
            self.errors.append(exc)
        finally:
            conn.origin_closed.set()
            for w in (writer, up_writer):
                if w is not None:
                    w.close()
            self._tasks.discard(task)

    async def _up(self, conn: TapConnection, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        pending = bytearray()
        try:
            while data := await src.read(READ_SIZE):
                if self.rewrite is None:
                    out = data
                else:
                    pending += data
                    out = b"".join(self.rewrite(conn, record) for record in split_records(pending))
                conn.up += out
                dst.write(out)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except (ConnectionError, OSError):
            pass

    async def _down(self, conn: TapConnection, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(READ_SIZE):
                conn.down += data
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            conn.origin_closed.set()
            try:
                if dst.can_write_eof():
                    dst.write_eof()
            except OSError:
                pass


class KeyRecordingServer(SplittingServer):
    """The splitting origin, keeping its connection objects so tests can read their real keys."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tls_connections: list[ServerConnection] = []

    def _connection(self, config: ServerConfig) -> ServerConnection:
        conn = super()._connection(config)
        self.tls_connections.append(conn)
        return conn

    def exported_states(self, loop: BackgroundLoop) -> list[dict[str, Any]]:
        """Every connection's state as :func:`tls12.state.export_connection` exports it (read on the loop)."""

        async def export() -> list[dict[str, Any]]:
            return [json.loads(export_connection(c)) for c in self.tls_connections]

        return loop.run(export())


@dataclass
class TappedProxy:
    """A real proxy whose two links to the origin (splitting port, record store) run through taps."""

    proxy: SplittingProxy
    stubs: Tap
    store: Tap

    @property
    def port(self) -> int:
        return self.proxy.port


def tapped_proxy(loop: BackgroundLoop, server: SplittingServer, rewrite: Rewriter | None = None) -> TappedProxy:
    """Start taps on both origin ports and a proxy (fresh memory cache) that talks through them."""

    async def start() -> TappedProxy:
        stubs = Tap(("127.0.0.1", server.port), rewrite)
        store = Tap(("127.0.0.1", server.store_port))
        await stubs.start()
        await store.start()
        hierarchy = CacheHierarchy([MemoryCache()], [PayloadClient("127.0.0.1", store.port, name="origin")])
        proxy = SplittingProxy(("127.0.0.1", stubs.port), hierarchy, idle_timeout=30.0)
        await proxy.start()
        return TappedProxy(proxy, stubs, store)

    return loop.run(start())


def close_tapped(loop: BackgroundLoop, tapped: TappedProxy) -> None:
    """Stop the proxy and both taps."""

    async def stop() -> None:
        await tapped.proxy.close()
        await tapped.stubs.close()
        await tapped.store.close()

    loop.run(stop())
