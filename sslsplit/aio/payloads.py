"""asyncio adapters of SSL splitting: the cache-miss protocol and a background event loop.

**The cache-miss protocol** -- fetching payloads by id over HTTP/1.1 (paper §3.5).

A proxy that receives a digest stub whose payload is in none of its caches
asks a *payload source* -- another proxy, or the origin server as the
authority of last resort -- with::

    GET /payload/<encoding number>/<hex id> HTTP/1.1

and gets ``200`` with the payload, or ``404``.  The same tiny server
(:func:`serve_payloads`) runs on the origin (backed by its
:class:`~sslsplit.store.RecordStore`) and, optionally, on proxies (backed by
their caches).  Whatever arrives is checked against its id by the caller:
sources are not trusted either.

**Streams that keep what arrived before a reset** (:class:`ResetAwareReader`,
:func:`open_connection`, :func:`start_server`).  asyncio's ``StreamReader``
raises ``ConnectionResetError`` from ``read()`` as soon as the peer's RST has
been seen, even when bytes that arrived *before* the RST are still in its
buffer: they are lost to the application.  A relay cannot afford that.  A TCP
peer sends an RST instead of a FIN when it closes its socket with received
bytes still unread -- e.g. an HTTPS origin that finishes a response without
reading the client's early close_notify -- and everything it sent before is
part of the response.  These readers hand out every byte first and then
report the end like an EOF, with the reset kept in ``reader.reset``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import Any, TypeVar

import h11

from ..wire import MAX_FIELD, IDEncoding, payload_path

__all__ = [
    "serve_payloads",
    "PayloadClient",
    "PayloadServerStats",
    "payload_path",
    "BackgroundLoop",
    "ResetAwareReader",
    "open_connection",
    "start_server",
]

logger = logging.getLogger(__name__)

_PATH = re.compile(rb"^/payload/(\d{1,5})/([0-9a-f]{2,200})$")
Lookup = Callable[[IDEncoding, bytes], "bytes | None | Awaitable[bytes | None]"]
"""A payload by id, or None; may be a coroutine (a peer that fetches on a miss)."""


@dataclass
class PayloadServerStats:
    """What a payload server sent: counted on its sockets, so it adds to the origin's bandwidth."""

    requests: int = 0
    found: int = 0
    bytes_out: int = 0
    bytes_in: int = 0


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, lookup: Lookup, timeout: float, stats: PayloadServerStats
) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=8192)
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                async with asyncio.timeout(timeout):
                    data = await reader.read(8192)
                stats.bytes_in += len(data)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                stats.requests += 1
                status, body = 404, b"not found\n"
                match = _PATH.match(event.target)
                if event.method != b"GET":
                    status, body = 405, b"method not allowed\n"
                elif match:
                    try:
                        found = lookup(IDEncoding(int(match.group(1))), bytes.fromhex(match.group(2).decode()))
                        if inspect.isawaitable(found):
                            found = await found
                    except ValueError:
                        found = None
                    if found is not None:
                        status, body = 200, found
                        stats.found += 1
                headers = [("Content-Length", str(len(body))), ("Content-Type", "application/octet-stream")]
                out = b"".join(
                    conn.send(e) or b""
                    for e in (h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase.encode()), h11.Data(data=body), h11.EndOfMessage())
                )
                stats.bytes_out += len(out)
                writer.write(out)
                await writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return
    except (h11.RemoteProtocolError, TimeoutError, ConnectionError) as exc:
        logger.debug("payload request failed: %r", exc)
    except asyncio.CancelledError:
        pass  # the server is shutting down
    finally:
        writer.close()


async def serve_payloads(
    lookup: Lookup, host: str, port: int, *, idle_timeout: float = 30.0, stats: PayloadServerStats | None = None
) -> asyncio.Server:
    """Serve ``GET /payload/<enc>/<hex id>`` from ``lookup`` (returns None when absent)."""
    the_stats = stats if stats is not None else PayloadServerStats()
    return await asyncio.start_server(lambda r, w: _handle(r, w, lookup, idle_timeout, the_stats), host, port)


class PayloadClient:
    """A keep-alive client of one payload source; requests are serialised."""

    def __init__(self, host: str, port: int, *, timeout: float = 10.0, name: str | None = None) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.name = name or f"{host}:{port}"
        self._lock = asyncio.Lock()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._conn: h11.Connection | None = None
        self.requests = 0
        self.bytes_in = 0

    async def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None

    async def fetch(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        """The payload, or None if the source does not have it; OSError/TimeoutError if unreachable."""
        async with self._lock:
            for attempt in (0, 1):  # a kept-alive connection may have been closed by the source
                try:
                    async with asyncio.timeout(self.timeout):
                        return await self._fetch(encoding, ident)
                except (ConnectionError, h11.ProtocolError, asyncio.IncompleteReadError):
                    await self.close()
                    if attempt:
                        raise ConnectionError(f"payload source {self.name} failed") from None
            return None

    async def _fetch(self, encoding: IDEncoding, ident: bytes) -> bytes | None:
        if self._streams is None or self._conn is None or self._conn.our_state is not h11.IDLE:
            self._streams = await asyncio.open_connection(self.host, self.port)
            self._conn = h11.Connection(h11.CLIENT)
        reader, writer = self._streams
        conn = self._conn
        self.requests += 1
        request = h11.Request(method="GET", target=payload_path(encoding, ident), headers=[("Host", self.name)])
        writer.write((conn.send(request) or b"") + (conn.send(h11.EndOfMessage()) or b""))
        await writer.drain()
        status = 0
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                self.bytes_in += len(data)
                conn.receive_data(data)
                if not data and conn.their_state is not h11.DONE:
                    raise ConnectionError("source closed the connection")
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_FIELD:
                    raise ConnectionError("payload larger than any record")
            elif isinstance(event, h11.EndOfMessage):
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
                else:
                    await self.close()
                return bytes(body) if status == 200 else None
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("source closed the connection")


class ResetAwareReader(asyncio.StreamReader):
    """A ``StreamReader`` that delivers every byte received before a reset, then EOF.

    ``read()`` returns the buffered bytes, then ``b""``; ``reset`` holds the
    ``ConnectionResetError`` (None after an orderly FIN).  Other errors are
    raised as usual.
    """

    def __init__(self, limit: int = 1 << 16) -> None:
        super().__init__(limit=limit)
        self.reset: ConnectionResetError | None = None

    def set_exception(self, exc: Exception) -> None:
        if isinstance(exc, ConnectionResetError):
            self.reset = exc
            self.feed_eof()
        else:
            super().set_exception(exc)


async def open_connection(
    host: str, port: int, *, local_host: str | None = None
) -> tuple[ResetAwareReader, asyncio.StreamWriter]:
    """Like :func:`asyncio.open_connection`, with a :class:`ResetAwareReader`; ``local_host``
    binds the connection's source address."""
    loop = asyncio.get_running_loop()
    reader = ResetAwareReader()
    protocol = asyncio.StreamReaderProtocol(reader)
    local = (local_host, 0) if local_host else None
    transport, _ = await loop.create_connection(lambda: protocol, host, port, local_addr=local)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def start_server(
    handler: Callable[[ResetAwareReader, asyncio.StreamWriter], Coroutine[Any, Any, None]], host: str, port: int
) -> asyncio.Server:
    """Like :func:`asyncio.start_server`; ``handler`` gets a :class:`ResetAwareReader`."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: asyncio.StreamReaderProtocol(ResetAwareReader(), handler),  # type: ignore[arg-type]  # the handler gets the ResetAwareReader passed here
        host,
        port,
    )


T = TypeVar("T")


class BackgroundLoop:
    """An event loop in a daemon thread; ``run(coro)`` executes a coroutine on it and waits.

    Example::

        with BackgroundLoop() as loop:
            server = loop.run(start_something())
            ...  # blocking client code in this thread
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="sslsplit-loop", daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> BackgroundLoop:
        self._thread.start()
        return self

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.run(_cancel_all(), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    def __enter__(self) -> BackgroundLoop:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
