"""One persistent HTTP/1.1 client connection (h11 over asyncio streams), and its errors.

:class:`HttpConnection` is what every SINE client mode and the tests' tampering proxies speak
through: one request at a time, the response head first and the body as an async iterator of
chunks, the connection reopened when the peer closed it.  ``bytes_received`` counts every byte
read from the socket (head and body), which is how the tests measure what a mode fetched.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable

import h11

from testbed.cli import connect_error

from ..errors import SineError

__all__ = ["HttpError", "ConnectFailed", "RangeUnsatisfiable", "HttpConnection"]


class HttpError(SineError):
    """Transport-level failure or an unexpected HTTP status."""


class ConnectFailed(HttpError):
    """The TCP connection or the TLS handshake to ``host:port`` failed (refused, unreachable,
    certificate not trusted).  Unlike a verification failure this ends the session:
    :meth:`SineClient.get` raises it instead of returning a failed :class:`FetchResult`."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        super().__init__(str(connect_error(f"{host}:{port}", cause)))
        self.host, self.port = host, port


class RangeUnsatisfiable(HttpError):
    """The byte range asked for selects nothing of the (signed) document."""


class HttpConnection:
    """One persistent HTTP/1.1 connection (h11), reopened when the peer closes it."""

    def __init__(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None,
                 on_connect: Callable[[], None] | None = None) -> None:
        self.host, self.port, self.ssl_context = host, port, ssl_context
        self.on_connect = on_connect
        self.bytes_received = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._conn: h11.Connection | None = None

    async def _open(self) -> None:
        try:
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ssl_context,
                server_hostname=self.host if self.ssl_context else None)
        except OSError as exc:
            raise ConnectFailed(self.host, self.port, exc) from exc
        self._conn = h11.Connection(h11.CLIENT)
        if self.on_connect:
            self.on_connect()

    async def connect(self) -> None:
        """Open the connection now unless it is open and idle (ready for a request).

        The TCP connect -- and, with an ``ssl_context``, the TLS handshake -- then happens here
        rather than inside the next :meth:`request`, which reuses the open connection.  Raises
        :class:`ConnectFailed` when the peer cannot be reached.
        """
        if self._conn is None or self._conn.our_state is not h11.IDLE:
            await self.close()
            await self._open()

    async def request(
        self, target: str, headers: list[tuple[str, str]], method: str = "GET"
    ) -> tuple[h11.Response, AsyncIterator[bytes]]:
        """Send a request; return the response head and an iterator over its body chunks.

        The body must be consumed (or :meth:`close` called) before the next request.
        """
        await self.connect()
        assert self._conn is not None and self._writer is not None
        conn = self._conn
        self._writer.write(conn.send(h11.Request(method=method, target=target, headers=headers)))
        self._writer.write(conn.send(h11.EndOfMessage()))
        await self._writer.drain()
        head = await self._next()
        if not isinstance(head, h11.Response):
            raise HttpError(f"unexpected {type(head).__name__}")
        return head, self._body()

    async def _next(self) -> h11.Event:
        assert self._conn is not None and self._reader is not None
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise HttpError(f"HTTP protocol error: {exc}") from None
            if event is h11.NEED_DATA:
                data = await self._reader.read(65536)
                self.bytes_received += len(data)
                self._conn.receive_data(data)
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            return event  # type: ignore[return-value]  # not NEED_DATA; PAUSED only after the response (see report)

    async def _body(self) -> AsyncIterator[bytes]:
        while True:
            event = await self._next()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert self._conn is not None
                if self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE:
                    self._conn.start_next_cycle()
                return
            else:
                raise HttpError(f"connection ended inside the body ({type(event).__name__})")

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                pass
        self._reader = self._writer = None
        self._conn = None
