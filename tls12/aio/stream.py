"""The stream adapter: drive the sans-IO :mod:`tls12` connections through asyncio streams.

The core (:class:`tls12.ServerConnection`, :class:`tls12.ClientConnection`)
never touches a socket; this package (:mod:`tls12.aio`) is the only place in
:mod:`tls12` that does.  It is deliberately small -- the pattern is the one of aioquic's
``asyncio/protocol.py``::

    raw bytes from the socket --> conn.receive_data() --> events
    conn.data_to_send()       --> raw bytes to the socket

Two entry points:

* :func:`serve` -- accept TLS connections and hand each one, after its
  handshake, to ``handler(stream)``;
* :func:`connect` -- open a TLS connection as a client.

Both give the application a :class:`TLSStream` with ``read()``, ``write()``,
``drain()`` and ``close()`` plus byte counters of the raw socket traffic in
each direction (``bytes_in``, ``bytes_out``) -- the counters the experiments
use to measure what a protocol costs on the wire.

Robustness rules, all enforced here and not in the core:

* **Fatal errors never crash the server.**  When the peer misbehaves the core
  queues a fatal alert and raises a :class:`tls12.errors.RemoteProtocolError`;
  the stream sends the alert, closes the socket and re-raises, and
  :func:`serve` logs the error and goes on serving other connections.
* **Bounded buffers.**  Raw bytes are read in chunks of ``read_size`` and only
  when the application asks for data (pull model), so a fast peer cannot make
  us buffer more than one chunk of decrypted records; writes honour
  ``drain()`` backpressure.
* **Timeouts live in the adapter**, because the core has no clock: a
  handshake that does not finish within ``handshake_timeout`` seconds (for
  instance a slow-loris peer that sends nothing) is aborted with a fatal
  alert.
* **A delegate that answers by event never blocks the loop.**  A server
  connection built with :class:`tls12.delegate.EventDelegate` returns its
  questions as :class:`tls12.events.DelegateNeeded` events; the stream answers
  each one in a task of its own with ``answer(conn, request)`` (given to
  :func:`serve` / :class:`TLSStream`) and supplies the result, so a slow key
  holder delays only the connections that wait for it.  While a connection
  waits for an answer it needs to read on, the stream reads nothing more from
  its socket; :meth:`TLSStream.drain` and :meth:`TLSStream.close` also wait
  for the records being sealed.  Time limits on answers are the ``answer``
  callable's (it returns an exception value, and the connection ends with
  ``internal_error``).

Example (a TLS echo server and a client)::

    async def echo(stream: TLSStream) -> None:
        while data := await stream.read():
            stream.write(data)
            await stream.drain()

    server = await serve(echo, "127.0.0.1", 0, server_config)
    port = server.sockets[0].getsockname()[1]
    client = await connect("127.0.0.1", port, ClientConfig(server_name="localhost"))
    client.write(b"ping")
    assert await client.read() == b"ping"
    await client.close()
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .. import ClientConnection, ServerConnection
from ..config import ClientConfig, ServerConfig
from ..errors import AlertDescription, AlertReceivedError, LocalProtocolError, TLSError
from ..events import (
    AlertReceived,
    ApplicationData,
    ConnectionClosed,
    DelegateNeeded,
    Event,
    HandshakeComplete,
)

__all__ = [
    "DEFAULT_READ_SIZE",
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "SansIOConnection",
    "TLSStream",
    "HandshakeTimeout",
    "Handler",
    "Answer",
    "serve",
    "connect",
]

logger = logging.getLogger("tls12.aio")  # one logger for the package's two adapters

DEFAULT_READ_SIZE = 65536
"""Bytes asked from the socket per read: bounds what one ``read()`` can buffer."""

DEFAULT_HANDSHAKE_TIMEOUT = 10.0
"""Seconds a peer gets to complete the handshake before the adapter gives up."""


class SansIOConnection(Protocol):
    """The part of the sans-IO connection API this adapter relies on.

    Any object with these methods can be driven -- the plain core classes, or
    the variants later protocols build on them (SSL splitting, Reverse SSL).
    """

    @property
    def handshake_complete(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    def receive_data(self, data: bytes) -> list[Event]: ...

    def send_data(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def abort(self, description: AlertDescription) -> None: ...

    def data_to_send(self) -> bytes: ...


Answer = Callable[[Any, Any], Awaitable[object]]
"""``answer(conn, request)``: the answer (or an exception value) to a
:class:`tls12.delegate.DelegateRequest` of ``conn`` (see the module docstring)."""


class HandshakeTimeout(TLSError):
    """The peer did not complete the handshake within the adapter's timeout."""

    description = AlertDescription.HANDSHAKE_FAILURE


class TLSStream:
    """One TLS connection over an asyncio stream pair, with raw byte counters.

    The stream owns the sans-IO ``conn`` and the asyncio ``reader``/``writer``.
    It moves bytes between them only when the application calls a method;
    there is no background task.  ``bytes_in`` / ``bytes_out`` count every
    byte read from / written to the socket (records, headers, alerts).
    """

    def __init__(
        self,
        conn: SansIOConnection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        read_size: int = DEFAULT_READ_SIZE,
        answer: Answer | None = None,
    ) -> None:
        self._init_state(conn, read_size=read_size, answer=answer)
        self.reader = reader
        self.writer = writer

    def _init_state(self, conn: SansIOConnection, *, read_size: int, answer: Answer | None) -> None:
        """Everything but the socket: shared with :class:`TLSProtocol`."""
        if read_size <= 0:
            raise ValueError("read_size must be positive")
        self.conn = conn
        self._answer = answer
        self._asks = bool(getattr(conn, "asks_by_event", False))
        if self._asks and answer is None:
            raise ValueError("a connection that asks its delegate by event needs answer=")
        self._progress = asyncio.Event()
        self._answering: set[asyncio.Task[object]] = set()
        self.read_size = read_size
        self.bytes_in = 0
        self.bytes_out = 0
        self.handshake: HandshakeComplete | None = None
        """The :class:`HandshakeComplete` event, once the handshake finished."""
        self.alerts: list[AlertReceived] = []
        """Every alert the peer sent, in order."""
        self.close_event: ConnectionClosed | None = None
        """How the TLS connection ended (``clean`` is False after a truncation)."""
        self.error: BaseException | None = None
        """The error that ended the connection, if any."""
        self.app_data: dict[str, Any] = {}
        """Free for the application (e.g. per-connection request counters)."""
        self._plaintext: deque[bytes] = deque()
        self._pending_error: TLSError | None = None
        self._socket_closed = False

    # -- properties ---------------------------------------------------------

    @property
    def peername(self) -> Any:
        """The peer's socket address (``(host, port)``)."""
        return self.writer.get_extra_info("peername")

    @property
    def at_eof(self) -> bool:
        """True once no more application data can arrive."""
        return not self._plaintext and (self.close_event is not None or self._socket_closed)

    @property
    def closed_cleanly(self) -> bool:
        """True if the peer ended the connection with close_notify (no truncation)."""
        return self.close_event is not None and self.close_event.clean

    # -- moving bytes ---------------------------------------------------------

    def _flush(self) -> None:
        """Write whatever the core queued to the socket (no await: buffered by asyncio)."""
        if self._asks:
            for request in self.conn.take_requests():  # type: ignore[attr-defined]  # _asks: a delegating core
                self._ask(request)
        data = self.conn.data_to_send()
        if data and not self._socket_closed and not self.writer.is_closing():
            self.writer.write(data)
            self.bytes_out += len(data)

    def _handle_events(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, ApplicationData):
                if event.data:
                    self._plaintext.append(event.data)
            elif isinstance(event, HandshakeComplete):
                self.handshake = event
            elif isinstance(event, AlertReceived):
                self.alerts.append(event)
            elif isinstance(event, ConnectionClosed):
                self.close_event = event
            elif isinstance(event, DelegateNeeded):
                self._ask(event.request)

    # -- questions to the delegate ---------------------------------------------

    def _ask(self, request: Any) -> None:
        """Have ``answer(conn, request)`` answered: a future gets a callback (no task), a
        coroutine runs in a task of its own."""
        assert self._answer is not None
        try:
            pending = self._answer(self.conn, request)
        except Exception as exc:  # noqa: BLE001 - a failed answer ends this connection only
            self._supply(request, exc)
            return
        if isinstance(pending, asyncio.Future):
            pending.add_done_callback(lambda done: self._supply(request, _outcome(done)))
            return
        task = asyncio.ensure_future(pending)
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)
        task.add_done_callback(lambda done: self._supply(request, _outcome(done)))

    def _supply(self, request: Any, answer: object) -> None:
        """Supply one answer; the events that follow are handled as a read's."""
        try:
            events = self.conn.supply(request.id, answer)  # type: ignore[attr-defined]  # _asks: a delegating core
        except TLSError as exc:
            self._handle_events(list(getattr(exc, "events", ())))
            self.error = exc
            self._pending_error = exc
            self._flush()
            self._abort()
        else:
            self._handle_events(events)
            self._flush()
        finally:
            self._progress.set()

    def _waiting(self) -> bool:
        """Whether the connection needs an answer before it can read on."""
        return self._asks and self.conn.waiting_for is not None  # type: ignore[attr-defined]  # _asks: a delegating core

    def _awaiting_seal(self) -> bool:
        """Whether a record written so far still waits for its delegate to seal it."""
        return self._asks and bool(self.conn.unsealed_slots)  # type: ignore[attr-defined]  # _asks: a delegating core

    async def _sealed(self) -> None:
        """Wait until every record written so far is sealed and on its way."""
        while self._awaiting_seal() and not self._socket_closed and self._pending_error is None:
            self._progress.clear()
            await self._progress.wait()

    async def _pump(self) -> None:
        """Read one chunk from the socket and feed it to the core.

        Raises the core's :class:`~tls12.errors.RemoteProtocolError` after the
        fatal alert it queued has been written and the socket closed.  While the
        connection waits for its delegate, wait for an answer instead of reading.
        """
        if self._waiting():
            self._progress.clear()
            await self._progress.wait()
            return
        try:
            data = await self.reader.read(self.read_size)
        except (ConnectionError, OSError) as exc:
            # reset by peer: behaves like an EOF without close_notify
            logger.debug("read failed on %s: %r", self.peername, exc)
            data = b""
        self.bytes_in += len(data)
        try:
            events = self.conn.receive_data(data)
        except TLSError as exc:
            # records authenticated before the bad one are still delivered (the
            # core attaches their events to the exception); read() raises after them
            self._handle_events(list(getattr(exc, "events", ())))
            self.error = exc
            self._flush()
            self._abort()
            if self._plaintext:
                self._pending_error = exc
                return
            raise
        self._handle_events(events)
        self._flush()
        if not data:
            # transport EOF: nothing more will come, whatever the core said
            self._socket_closed = True
            if self.close_event is None:
                self.close_event = ConnectionClosed(clean=False)
            self._abort()
        elif self.close_event is not None and not self.close_event.clean:
            # fatal alert from the peer: the TLS connection is over
            self._abort()

    async def do_handshake(self, timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT) -> HandshakeComplete:
        """Exchange handshake messages until the core reports :class:`HandshakeComplete`.

        On timeout a fatal ``handshake_failure`` alert is sent (plaintext, as no
        keys are in use yet), the socket is closed and :class:`HandshakeTimeout`
        is raised.  Application data that arrives together with the final
        handshake flight stays buffered for :meth:`read`.
        """
        self._flush()  # a client's ClientHello is queued at construction
        try:
            async with asyncio.timeout(timeout):
                await self.drain()
                while self.handshake is None:
                    if self._pending_error is not None:
                        raise self._pending_error
                    if self.close_event is not None or self._socket_closed:
                        desc = self.alerts[-1].description if self.alerts else None
                        if desc is not None:
                            raise AlertReceivedError(desc, f"peer sent alert {desc!r} during handshake")
                        raise ConnectionResetError("connection closed during the handshake")
                    await self._pump()
                await self.drain()
        except TimeoutError:
            # the core protects the alert with the keys in use, if any
            self.conn.abort(AlertDescription.HANDSHAKE_FAILURE)
            record = self.conn.data_to_send()
            if record and not self._socket_closed and not self.writer.is_closing():
                self.writer.write(record)
                self.bytes_out += len(record)
            self._abort()
            exc = HandshakeTimeout(f"handshake not complete after {timeout} s")
            self.error = exc
            raise exc from None
        return self.handshake

    async def read(self, max_bytes: int = DEFAULT_READ_SIZE) -> bytes:
        """Up to ``max_bytes`` of authenticated application data; ``b""`` at EOF.

        EOF means the peer sent close_notify, a fatal alert, or closed the
        socket; :attr:`closed_cleanly` tells a clean close from a truncation.
        Raises :class:`~tls12.errors.RemoteProtocolError` if the peer's bytes
        are invalid (after sending the alert and closing the socket).
        """
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        while not self._plaintext:
            if self._pending_error is not None:
                exc, self._pending_error = self._pending_error, None
                raise exc
            if self.close_event is not None or self._socket_closed:
                return b""
            await self._pump()
        chunk = self._plaintext.popleft()
        if len(chunk) > max_bytes:
            self._plaintext.appendleft(chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        return chunk

    async def read_exactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes of application data; raises :class:`asyncio.IncompleteReadError` at EOF."""
        parts: list[bytes] = []
        got = 0
        while got < n:
            chunk = await self.read(min(n - got, DEFAULT_READ_SIZE))
            if not chunk:
                raise asyncio.IncompleteReadError(b"".join(parts), n)
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    async def read_all(self, limit: int = 1 << 30) -> bytes:
        """Read until EOF (at most ``limit`` bytes, else :class:`ValueError`)."""
        parts: list[bytes] = []
        got = 0
        while chunk := await self.read():
            got += len(chunk)
            if got > limit:
                raise ValueError(f"more than {limit} bytes before EOF")
            parts.append(chunk)
        return b"".join(parts)

    def write(self, data: bytes) -> None:
        """Encrypt ``data`` into records and queue them on the socket.

        Call :meth:`drain` regularly when writing a lot: asyncio buffers
        without bound until then.
        """
        if self._socket_closed or self.writer.is_closing():
            raise ConnectionResetError("the TLS stream is closed")
        self.conn.send_data(data)
        self._flush()

    def write_last(self, data: bytes) -> None:
        """Like :meth:`write`, with close_notify queued right behind ``data`` in the same flush.

        For the last bytes of a connection (an HTTP response after which the connection
        closes): the records are those of ``write(data)`` then ``close()``, in that order; a
        connection that seals through a delegate can seal both in one call.  :meth:`close`
        still has to be awaited to close the socket.
        """
        if self._socket_closed or self.writer.is_closing():
            raise ConnectionResetError("the TLS stream is closed")
        self.conn.send_data(data)
        self.conn.close()
        self._flush()

    async def drain(self) -> None:
        """Wait until the socket's write buffer is below its high-water mark."""
        if self._socket_closed:
            return
        await self._sealed()
        try:
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            self._socket_closed = True
            raise ConnectionResetError(f"peer closed the connection: {exc!r}") from exc

    async def close(self, timeout: float = 5.0, *, wait_for_peer: bool = False) -> None:
        """Send close_notify, flush and close the socket (never raises on a dead peer).

        With ``wait_for_peer`` the stream first waits (up to ``timeout``) for
        the peer's close_notify, discarding data that still arrives, so that
        both sides have seen -- and counted -- every byte of the connection.
        Then it half-closes TCP and waits (within the same ``timeout``) for the
        peer to close its side, so that late bytes never reset the connection.
        """
        if not self._socket_closed and not self.writer.is_closing():
            try:
                if not self.conn.closed:
                    self.conn.close()
                self._flush()
            except LocalProtocolError:
                pass
            try:
                async with asyncio.timeout(timeout):
                    await self._sealed()
                    await self.writer.drain()
                    while wait_for_peer and self.close_event is None and not self._socket_closed:
                        await self._pump()
                        self._plaintext.clear()
                    # Lingering close: send a FIN, then drop what still arrives until the peer
                    # closes.  A socket closed with bytes unread (a close_notify the peer sent
                    # while still receiving) answers with a reset, and the kernel throws away
                    # the records still queued for the peer: a truncated response.
                    if not self._socket_closed and self.writer.can_write_eof():
                        self.writer.write_eof()
                        while await self.reader.read(self.read_size):
                            pass
            except (ConnectionError, OSError, TimeoutError, TLSError):
                pass
        self._abort()
        try:
            async with asyncio.timeout(timeout):
                await self.writer.wait_closed()
        except (ConnectionError, OSError, TimeoutError):
            pass

    def _abort(self) -> None:
        """Close the socket now (what was already written is still sent by the kernel)."""
        self._socket_closed = True
        if not self.writer.is_closing():
            self.writer.close()

    def __repr__(self) -> str:
        state = "handshaken" if self.handshake else "handshaking"
        if self.at_eof:
            state = "closed"
        return f"<TLSStream {self.peername} {state} in={self.bytes_in} out={self.bytes_out}>"


def _outcome(done: asyncio.Future[Any]) -> object:
    """A finished answer future's result, or its failure as the answer."""
    if done.cancelled():
        return asyncio.CancelledError("the answer was cancelled")
    exc = done.exception()
    if exc is not None:
        logger.error("answering a delegate question failed: %r", exc)
        return exc
    return done.result()


Handler = Callable[[TLSStream], Awaitable[None]]
"""What :func:`serve` calls with each handshaken connection."""


async def serve(
    handler: Handler,
    host: str,
    port: int,
    config: ServerConfig,
    *,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
    read_size: int = DEFAULT_READ_SIZE,
    connection_factory: Callable[[ServerConfig], SansIOConnection] = ServerConnection,
    on_open: Callable[[TLSStream], None] | None = None,
    on_close: Callable[[TLSStream], None] | None = None,
    answer: Answer | None = None,
    **server_kwargs: Any,
) -> asyncio.Server:
    """Start a TLS server; each connection is handshaken, then given to ``handler``.

    ``port=0`` picks a free port: read it from ``server.sockets[0].getsockname()``.
    ``connection_factory`` builds the sans-IO object per connection (default
    :class:`~tls12.ServerConnection`; protocol variants pass their own).
    ``on_open(stream)`` is called for every accepted connection before its
    handshake, ``on_close(stream)`` once per connection after its socket was
    closed -- the place to collect byte counters.  ``answer``: how questions of
    connections that ask their delegate by event are answered (see the module
    docstring).

    Any error of one connection (protocol violation, handshake timeout, reset,
    a bug in ``handler``) is logged and closes that connection only.
    """

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = TLSStream(connection_factory(config), reader, writer, read_size=read_size,
                           answer=answer)
        if on_open is not None:
            on_open(stream)
        try:
            await stream.do_handshake(handshake_timeout)
            await handler(stream)
        except TLSError as exc:
            logger.info("TLS error from %s: %s: %s", stream.peername, type(exc).__name__, exc)
        except (ConnectionError, OSError) as exc:
            logger.info("connection from %s lost: %r", stream.peername, exc)
        except asyncio.CancelledError:
            stream._abort()
            raise
        except Exception:
            logger.exception("handler failed for %s", stream.peername)
        finally:
            await stream.close()
            if on_close is not None:
                try:
                    on_close(stream)
                except Exception:
                    logger.exception("on_close callback failed")

    return await asyncio.start_server(on_connect, host, port, **server_kwargs)


async def connect(
    host: str,
    port: int,
    config: ClientConfig,
    *,
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
    read_size: int = DEFAULT_READ_SIZE,
    connection_factory: Callable[[ClientConfig], SansIOConnection] = ClientConnection,
) -> TLSStream:
    """Open a TCP connection, run the TLS handshake as a client, return the stream.

    The :class:`HandshakeComplete` event is in ``stream.handshake`` (negotiated
    suite, resumption, EMS); the resumable session in ``stream.conn.session``.
    """
    async with asyncio.timeout(handshake_timeout):
        reader, writer = await asyncio.open_connection(host, port)
    stream = TLSStream(connection_factory(config), reader, writer, read_size=read_size)
    try:
        await stream.do_handshake(handshake_timeout)
    except BaseException:
        stream._abort()
        raise
    return stream
