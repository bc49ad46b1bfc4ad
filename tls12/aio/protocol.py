"""The transport-level adapter: :class:`TLSProtocol` and :func:`serve_protocol`.

:class:`TLSStream` drives a connection through asyncio's ``StreamReader`` / ``StreamWriter``:
easy to read, and the API to teach with, but every read is a future and a task switch inside
the stream objects, and a server pays a task per connection from its first byte.
:class:`TLSProtocol` and :func:`serve_protocol` are the same adapter one level down, the
pattern of aioquic's ``asyncio/protocol.py`` (the servers of :mod:`testbed.apps` use it)::

    transport --buffer_updated()--> conn.receive_data() --> events
    conn.data_to_send() --transport.write()--> transport

* **No stream objects.**  Bytes arrive in a receive buffer (``get_buffer`` / ``buffer_updated``,
  one ``recv_into`` per readable event; one buffer per thread, copied out at once) and leave
  through ``transport.write``.
* **The handshake runs in callbacks.**  :func:`serve_protocol` creates no task until the
  handshake is complete: the records of a handshake are fed to the core as they arrive, its
  answer is written at the end of the same callback (one write per received chunk, whatever
  the core queued in between), and the handshake timeout is a timer, not a task waiting.
  With ``lazy_handler`` not even then: the task starts with the client's first bytes after
  the handshake, so a client that handshakes and leaves costs no task at all.
* **The application side is a** :class:`tls12.aio.TLSStream`: :class:`TLSProtocol` is a
  subclass, so a handler written for :func:`tls12.aio.serve` (``read``, ``write``,
  ``write_last``, ``drain``, ``close``, the byte counters, ``handshake``, ``alerts``,
  ``app_data``) runs unchanged, and so do ``on_open`` / ``on_close`` callbacks.
* **A read without a task switch.**  :attr:`TLSProtocol.fast_reader`, if set, is offered the
  plaintext that arrives while the application waits in :meth:`~tls12.aio.TLSStream.read`
  with nothing buffered; if it answers ``True`` it has consumed it (and written any reply)
  inside the callback, and the waiting ``read`` goes on waiting.  The HTTPS file server serves
  keep-alive GETs of small files this way (:mod:`testbed.apps.file_handler`).  A connection that
  asks its delegate by event gets its plaintext later, with the ``open`` answer: it is offered there.

The robustness rules above hold for it too, kept the same way:

* **Records are read when the application reads.**  Once the handshake is done, bytes that
  arrive while the application is not reading are kept raw, unopened, as they would be in a
  ``StreamReader``: an alert or close_notify sent while a response is still being written is
  seen at the next read, not in the middle of the response (a TLS half-close ends only the
  peer's direction).  End of file is reported after the plaintext before it.
* **Bounded buffers, both directions.**  More than ``read_size`` raw bytes waiting for the
  application pause the transport's reading (``pause_reading``) until it reads; the transport's
  own high-water mark pauses writing (``pause_writing``) and :meth:`TLSProtocol.drain` waits
  for ``resume_writing``.  A peer that sends without reading, or reads slowly, costs a bounded
  amount of memory.
* **Fatal errors never crash the server**: the alert is written, the transport closed, the
  error logged, other connections go on.  ``connection_lost`` in the middle of a handshake ends
  that connection only (``on_close`` is called once either way).
* **Delegates answered by event** (:class:`tls12.delegate.EventDelegate`): while the
  connection waits for an answer nothing more is fed to it (the bytes stay raw, bounded as
  above), as in the stream adapter.

The echo server of :mod:`tls12.aio.stream`'s example, on the transport-level adapter::

    server = await serve_protocol(echo, "127.0.0.1", 0, server_config)
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, cast

from .. import ServerConnection
from ..config import ServerConfig
from ..errors import AlertDescription, LocalProtocolError, TLSError
from ..events import ConnectionClosed
from .stream import (
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_READ_SIZE,
    Answer,
    HandshakeTimeout,
    SansIOConnection,
    TLSStream,
)

__all__ = ["TLSProtocol", "ProtocolHandler", "serve_protocol"]

logger = logging.getLogger("tls12.aio")

_buffers = threading.local()


def _receive_buffer(size: int) -> memoryview:
    """This thread's receive buffer of ``size`` bytes (see :meth:`TLSProtocol.get_buffer`)."""
    try:
        return _buffers.by_size[size]  # type: ignore[no-any-return]  # a threading.local attribute
    except AttributeError:
        _buffers.by_size = {}
    except KeyError:
        pass
    view: memoryview = memoryview(bytearray(size))
    _buffers.by_size[size] = view
    return view

ProtocolHandler = Callable[[TLSStream], Awaitable[None]]
"""What :func:`serve_protocol` calls with each handshaken connection (a :class:`TLSProtocol`)."""


class TLSProtocol(TLSStream, asyncio.BufferedProtocol):
    """One TLS connection on an asyncio transport; to the application, a :class:`~tls12.aio.TLSStream`.

    Built by :func:`serve_protocol` for each accepted connection (``handler`` given: the
    handshake runs in callbacks, then ``handler(self)`` in a task of its own), or by hand with
    ``loop.create_connection(lambda: TLSProtocol(conn), ...)`` and then ``await
    protocol.do_handshake()`` as with a stream.  ``bytes_in`` / ``bytes_out`` count what was
    received from / written to the transport.
    """

    fast_reader: Callable[[bytes], bool] | None
    """Offered the plaintext that arrives while :meth:`read` waits with nothing buffered (see
    the module docstring, *The transport-level adapter*); ``True``: consumed, ``read`` keeps waiting."""

    def __init__(
        self,
        conn: SansIOConnection,
        *,
        read_size: int = DEFAULT_READ_SIZE,
        answer: Answer | None = None,
        handler: ProtocolHandler | None = None,
        handshake_timeout: float | None = DEFAULT_HANDSHAKE_TIMEOUT,
        on_open: Callable[[TLSStream], None] | None = None,
        on_close: Callable[[TLSStream], None] | None = None,
        lazy_handler: float | None = None,
    ) -> None:
        self._init_state(conn, read_size=read_size, answer=answer)
        self.fast_reader = None
        self._handler = handler
        self._lazy_handler = lazy_handler
        self.handshake_at: float | None = None
        """Loop time when the handshake completed (``None`` before)."""
        self._handshake_timeout = handshake_timeout
        self._on_open = on_open
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._peername: Any = None
        self._view = _receive_buffer(read_size)
        self._raw = bytearray()
        """Bytes received and not yet fed to the core (the application is not reading)."""
        self._in_handshake = handler is not None
        """Server mode before the handshake completes: records are fed as they arrive."""
        self._waiter: asyncio.Future[None] | None = None
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._write_paused = False
        self._read_paused = False
        self._eof = False
        """The peer ended its direction (FIN); reported after the bytes before it."""
        self._lost = False
        self._lingering = False
        self._closed_future: asyncio.Future[None] | None = None
        """Made by the first :meth:`close` that waits for ``connection_lost``."""
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._finished = False
        self._handler_done = False

    # -- asyncio.BaseProtocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """asyncio: the connection is open; a server connection starts its handshake timer."""
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass, only alike
        self._peername = transport.get_extra_info("peername")
        if self._on_open is not None:
            self._on_open(self)
        if self._handler is not None and self._handshake_timeout is not None:
            self._timer = self._loop.call_later(self._handshake_timeout, self._handshake_timed_out)
        self._flush()  # a client's ClientHello is queued at construction

    def connection_lost(self, exc: Exception | None) -> None:
        """asyncio: the connection is gone; wakes every waiter, ``on_close`` once."""
        self._lost = True
        self._socket_closed = True
        closed = self._closed_future
        if closed is not None and not closed.done():
            closed.set_result(None)
        self._cancel_timer()
        self._wake()
        for fut in self._drain_waiters:
            if not fut.done():
                fut.set_exception(ConnectionResetError("connection lost"))
        self._drain_waiters.clear()
        if self._handler_done:
            self._finish()
        elif self._task is None and self._handler is not None:  # in the handshake, or a lazy handler not started
            if self._in_handshake and self.error is None and self.handshake is None:
                logger.info("connection from %s lost during the handshake: %r", self._peername, exc)
            self._finish()

    def pause_writing(self) -> None:
        """asyncio: the transport's buffer is above its high-water mark; :meth:`drain` waits."""
        self._write_paused = True

    def resume_writing(self) -> None:
        """asyncio: the transport's buffer drained below its low-water mark."""
        self._write_paused = False
        for fut in self._drain_waiters:
            if not fut.done():
                fut.set_result(None)
        self._drain_waiters.clear()

    # -- asyncio.BufferedProtocol ---------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        """The receive buffer (asyncio reads into it with ``recv_into``): one per thread and size,
        shared by the protocols of the thread's event loop, since :meth:`buffer_updated` copies
        what arrived out of it at once (the transport calls the two back to back)."""
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        """asyncio: ``nbytes`` arrived in :meth:`get_buffer`'s buffer (fed, or kept raw)."""
        if self._lingering or self._socket_closed:
            return  # closing: what still arrives is dropped (see close())
        data = bytes(self._view[:nbytes])
        self.bytes_in += nbytes
        if self._in_handshake:
            if self._waiting():
                self._keep_raw(data)
                return
            self._handshake_step(data)
            return
        waiter = self._waiter
        if waiter is None or waiter.done() or self._waiting() or self._raw:
            self._keep_raw(data)
            if self._task is None and self._handler is not None:
                self._start_handler()  # lazy_handler: the first bytes after the handshake
            return
        self._feed(data)
        if not self._offer_fast():
            self._wake()

    def eof_received(self) -> bool:
        """asyncio: the peer closed its side (a half-close)."""
        self._eof = True
        if self._in_handshake:
            if not self._waiting() and not self._raw:
                self._handshake_step(b"")
        elif self._task is None and self._handler is not None:  # lazy_handler, not started yet
            if self._raw or self._waiting():
                self._start_handler()  # it reads what is pending, then the end of file
            else:  # the peer ended its side before sending anything: no handler runs
                self._handler_done = True
                self._cancel_timer()
                self._feed(b"")
        else:
            self._wake()
        return True  # keep the transport open for writing: a half-close ends the peer's side only

    # -- feeding the core --------------------------------------------------------

    def _offer_fast(self) -> bool:
        """Offer :attr:`fast_reader` the plaintext just fed (in :meth:`buffer_updated`, or with an
        ``open`` answer in :meth:`_supply`) if it is one piece and nothing went wrong; True: consumed."""
        fast = self.fast_reader
        if (fast is not None and len(self._plaintext) == 1 and self.close_event is None
                and self._pending_error is None and not self._socket_closed and fast(self._plaintext[0])):
            self._plaintext.clear()
            return True
        return False

    def _keep_raw(self, data: bytes) -> None:
        self._raw += data
        if not self._read_paused and len(self._raw) >= self.read_size and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()

    def _take_raw(self) -> bytes:
        data = bytes(self._raw)
        self._raw.clear()
        if self._read_paused and self._transport is not None and not self._socket_closed:
            self._read_paused = False
            self._transport.resume_reading()
        return data

    def _feed(self, data: bytes) -> bool:
        """Feed ``data`` (``b""``: end of file) to the core and handle what it meant, as the stream
        adapter's ``_pump`` does; False if the core refused it (error kept for :meth:`read`)."""
        try:
            events = self.conn.receive_data(data)
        except TLSError as exc:
            self._handle_events(list(getattr(exc, "events", ())))
            self.error = exc
            self._pending_error = exc
            self._flush()
            self._abort()
            return False
        self._handle_events(events)
        self._flush()
        if not data:
            self._socket_closed = True
            if self.close_event is None:
                self.close_event = ConnectionClosed(clean=False)
            self._abort()
        elif self.close_event is not None and not self.close_event.clean:
            self._abort()  # fatal alert from the peer: the TLS connection is over
        return True

    def _handshake_step(self, data: bytes) -> None:
        """Server mode, before the handler: feed what arrived, then see where the handshake is."""
        self._feed(data)
        self._handshake_progress()

    def _handshake_progress(self) -> None:
        """Start the handler once handshaken; log how a handshake that cannot go on ended."""
        if self._socket_closed and self.handshake is None:
            if self._pending_error is not None:
                exc = self._pending_error
                logger.info("TLS error from %s: %s: %s", self._peername, type(exc).__name__, exc)
            else:
                desc = self.alerts[-1].description if self.alerts else None
                logger.info("connection from %s closed during the handshake (alert %r)", self._peername, desc)
            self._abort()
            return
        if self._waiting():
            return
        if self.handshake is None:
            if self._raw:
                self._handshake_step(self._take_raw())
            elif self._eof:
                self._handshake_step(b"")
            return
        self._in_handshake = False
        self.handshake_at = self._loop.time()
        if self._handler is None or self._task is not None:
            self._cancel_timer()
        elif (self._lazy_handler is None or self._raw or self._plaintext or self._eof or self._socket_closed
                or self.close_event is not None or self._pending_error is not None):
            self._start_handler()
        else:  # see lazy_handler in serve_protocol: started by the first bytes, or at the latest...
            self._lazy_timer()

    def _lazy_timer(self) -> None:
        """... ``lazy_handler`` seconds after the handshake.  A handshake timer that fires before
        that is kept, and calls back here when it fires: one timer per connection, not two."""
        assert self.handshake_at is not None and self._lazy_handler is not None
        due = self.handshake_at + self._lazy_handler
        if self._timer is not None and self._timer.when() <= due:
            return
        self._cancel_timer()
        self._timer = self._loop.call_at(due, self._start_handler)

    def _start_handler(self) -> None:
        """Run ``handler(self)`` in a task of its own (once)."""
        self._cancel_timer()
        if self._task is None and self._handler is not None and not self._handler_done:
            self._task = self._loop.create_task(self._run_handler(self._handler))

    def _handshake_timed_out(self) -> None:
        self._timer = None
        if self.handshake is not None and self._task is None and not self._handler_done and not self._socket_closed:
            self._lazy_timer()  # the handshake is over; its timer now waits for the lazy handler
            return
        if self.handshake is not None or self._socket_closed:
            return
        self.conn.abort(AlertDescription.HANDSHAKE_FAILURE)
        record = self.conn.data_to_send()
        if record and self._transport is not None and not self._transport.is_closing():
            self._transport.write(record)
            self.bytes_out += len(record)
        exc = HandshakeTimeout(f"handshake not complete after {self._handshake_timeout} s")
        self.error = exc
        logger.info("TLS error from %s: %s: %s", self._peername, type(exc).__name__, exc)
        self._abort()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- the TLSStream internals, on a transport ----------------------------------

    @property
    def peername(self) -> Any:
        return self._peername

    @property
    def write_ready(self) -> bool:
        """Whether a write now goes straight to an open transport below its high-water mark (and
        no record waits for a delegate to seal it): what a :attr:`fast_reader` checks first."""
        return not (self._write_paused or self._socket_closed or self._awaiting_seal())

    def _flush(self) -> None:
        if self._asks:
            for request in self.conn.take_requests():  # type: ignore[attr-defined]  # _asks: a delegating core
                self._ask(request)
        data = self.conn.data_to_send()
        transport = self._transport
        if data and transport is not None and not self._socket_closed and not transport.is_closing():
            transport.write(data)
            self.bytes_out += len(data)

    def _supply(self, request: Any, answer: object) -> None:
        super()._supply(request, answer)
        if self._in_handshake:
            self._handshake_progress()
        elif self._raw and not self._waiting():
            self._wake()  # a waiting read feeds the raw bytes
        if not self._in_handshake:
            self._offer_fast()  # an open's plaintext, as buffer_updated offers a record's

    async def _pump(self) -> None:
        """Feed the raw bytes kept for the application, or the end of file, or wait for either."""
        if self._waiting():
            self._progress.clear()
            await self._progress.wait()
            return
        if self._raw:
            data = self._take_raw()
        elif self._eof or self._lost:
            data = b""
        else:
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
            if self._plaintext or self._pending_error is not None or self.close_event is not None:
                return  # buffer_updated fed the core already
            if self._raw:
                data = self._take_raw()
            elif self._eof or self._lost:
                data = b""
            else:
                return
        if not self._feed(data) and not self._plaintext:
            exc, self._pending_error = self._pending_error, None
            assert exc is not None
            raise exc

    async def drain(self) -> None:
        if self._socket_closed:
            return
        await self._sealed()
        if self._lost:
            raise ConnectionResetError("peer closed the connection")
        if self._write_paused:
            fut = self._loop.create_future()
            self._drain_waiters.append(fut)
            await fut

    def write(self, data: bytes) -> None:
        if self._socket_closed or self._transport is None or self._transport.is_closing():
            raise ConnectionResetError("the TLS stream is closed")
        self.conn.send_data(data)
        self._flush()

    def write_last(self, data: bytes) -> None:
        if self._socket_closed or self._transport is None or self._transport.is_closing():
            raise ConnectionResetError("the TLS stream is closed")
        self.conn.send_data(data)
        self.conn.close()
        self._flush()

    async def close(self, timeout: float = 5.0, *, wait_for_peer: bool = False, wait_closed: bool = True) -> None:
        """:meth:`TLSStream.close`; ``wait_closed=False`` returns without waiting for
        ``connection_lost`` (the transport is closing, or aborted after ``timeout``)."""
        transport = self._transport
        if transport is not None and not self._socket_closed and not transport.is_closing():
            try:
                if not self.conn.closed:
                    self.conn.close()
                self._flush()
            except LocalProtocolError:
                pass
            try:
                async with asyncio.timeout(timeout):
                    await self._sealed()
                    await self.drain()
                    while wait_for_peer and self.close_event is None and not self._socket_closed:
                        await self._pump()
                        self._plaintext.clear()
                    # Lingering close, as in the stream adapter: a FIN, then drop what still
                    # arrives until the peer closes, so that late bytes never reset the records
                    # still queued for the peer.
                    if not self._socket_closed and transport.can_write_eof():
                        transport.write_eof()
                        self._lingering = True
                        self._raw.clear()
                        if self._read_paused:
                            self._read_paused = False
                            transport.resume_reading()
                        while not (self._eof or self._lost):
                            self._waiter = self._loop.create_future()
                            try:
                                await self._waiter
                            finally:
                                self._waiter = None
            except (ConnectionError, OSError, TimeoutError, TLSError):
                pass
        self._abort()
        if self._lost:
            return
        if not wait_closed:
            # a peer that reads nothing could keep a closing transport open: abort it then
            self._loop.call_later(timeout, self._force_lost)
            return
        if self._closed_future is None:
            self._closed_future = self._loop.create_future()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._closed_future)
        except (ConnectionError, OSError, TimeoutError):
            pass

    def _force_lost(self) -> None:
        if not self._lost and self._transport is not None:
            self._transport.abort()

    def _abort(self) -> None:
        self._socket_closed = True
        self._cancel_timer()
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    # -- the handler -------------------------------------------------------------

    async def _run_handler(self, handler: ProtocolHandler) -> None:
        """``handler(self)``, its errors logged as :func:`tls12.aio.serve` logs them, then close;
        ``on_close`` once the transport is closed (at once if the handler was cancelled)."""
        cancelled = False
        try:
            await handler(self)
        except TLSError as exc:
            logger.info("TLS error from %s: %s: %s", self._peername, type(exc).__name__, exc)
        except (ConnectionError, OSError) as exc:
            logger.info("connection from %s lost: %r", self._peername, exc)
        except asyncio.CancelledError:
            cancelled = True
            self._abort()
            raise
        except Exception:
            logger.exception("handler failed for %s", self._peername)
        finally:
            await self.close(wait_closed=False)
            self._handler_done = True
            if self._lost or cancelled:
                self._finish()  # else connection_lost calls it

    def _finish(self) -> None:
        """Call ``on_close`` once, after the transport was closed."""
        if self._finished:
            return
        self._finished = True
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                logger.exception("on_close callback failed")

    def __repr__(self) -> str:
        state = "handshaken" if self.handshake else "handshaking"
        if self.at_eof:
            state = "closed"
        return f"<TLSProtocol {self._peername} {state} in={self.bytes_in} out={self.bytes_out}>"


async def serve_protocol(
    handler: ProtocolHandler,
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
    lazy_handler: float | None = None,
    **server_kwargs: Any,
) -> asyncio.Server:
    """Start a TLS server on the transport-level adapter: :func:`tls12.aio.serve`'s arguments
    and guarantees, a :class:`TLSProtocol` per connection, no task until its handshake is done.

    ``lazy_handler``, for protocols in which the client speaks first (HTTP): no task until the
    client sends something after the handshake either.  The handler starts when the first bytes
    after the handshake arrive, or ``lazy_handler`` seconds after the handshake, whichever
    comes first (:attr:`TLSProtocol.handshake_at` says when the handshake ended, for a handler
    whose idle timeout counts from there); a client that ends its side (FIN) before sending
    anything ends the connection without the handler, as a handler that reads end of file at
    once would.  ``None`` (the default): the handler starts when the handshake is complete.

    ``server_kwargs`` go to ``loop.create_server`` (``backlog``, ``reuse_port``, ...).
    """
    loop = asyncio.get_running_loop()

    def factory() -> TLSProtocol:
        return TLSProtocol(connection_factory(config), read_size=read_size, answer=answer, handler=handler,
                           handshake_timeout=handshake_timeout, on_open=on_open, on_close=on_close,
                           lazy_handler=lazy_handler)

    return await loop.create_server(factory, host, port, **server_kwargs)
