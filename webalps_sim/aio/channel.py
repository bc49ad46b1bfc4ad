"""The host's asyncio channel to its guardian: many questions in flight, answered by request id.

A WebALPS host runs every client connection as a :class:`tls12.ServerConnection` that asks its
delegate by event (:class:`tls12.delegate.EventDelegate`).  :class:`GuardianChannel` answers
those questions over the guardian's Unix socket without ever blocking the event loop::

    channel = GuardianChannel("/run/guardian.sock", timeout=30.0)
    await channel.connect()                       # HELLO: the chain, the run id
    answer = await channel.answer(request)        # a DelegateRequest -> its answer

* **Pipelined, without a task per question.**  Each request gets an id (:mod:`webalps_sim.protocol`
  frames carry one) and goes out at once; the channel's protocol object decodes replies as they
  arrive and settles the future of each id in the same step (:meth:`GuardianChannel.ask`
  returns that future), so requests of many connections are in flight together and may be
  answered in any order.  The future's plain callbacks (the connection's stream registers one)
  run the moment the reply is decoded, not one event-loop step later; an awaiting task wakes as
  usual.  A server Finished the guardian sealed in advance is answered at once, without a
  round trip and without a task.
* **Bounded waiting.**  ``answer`` waits at most ``timeout`` seconds; then it returns
  :class:`GuardianUnavailable` (the connection that asked ends with ``internal_error``, every
  other connection goes on).  A late reply is dropped.  One timer per channel (armed for the
  oldest question, not one per question) enforces it.  A frozen guardian (SIGSTOP) therefore
  stalls only the connections that wait for it: the others, and plain HTTP in the same
  process, are served; when the guardian resumes, the waiting connections are answered.
* **Failures are values.**  ``answer`` never raises: a refused request, a lost channel or a
  malformed reply is an exception *value* (:mod:`webalps_sim.questions`), which the stream
  supplies to the connection.  A guardian that died is reconnected on the next request; every
  reconnection runs the ``on_restart`` callbacks (the guardian frees the handles of a closed
  host connection, so the host's session cache is emptied: the next resumptions are full
  handshakes).
* **RELEASE rides along.**  Nobody waits for a ``RELEASE``: it goes out in the same write as the
  next request (one guardian wake-up for both, and its reply comes back with that request's),
  after :data:`RELEASE_DELAY` seconds if no request comes, at once when
  :attr:`GuardianChannel.MAX_DEFERRED` wait, and when the channel closes.
* **Counted.**  :attr:`GuardianChannel.requests` counts requests per operation,
  :attr:`GuardianChannel.round_trips` the requests that went to the guardian and were waited
  for (neither the Finished sealed in advance nor ``RELEASE``), and ``bytes_out`` /
  ``bytes_in`` the bytes each way.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from tls12.delegate import DelegateRequest, KeyHandle

from .. import protocol as p
from ..questions import Asker, GuardianProtocolError, GuardianUnavailable

__all__ = ["GuardianChannel", "DEFAULT_TIMEOUT", "RELEASE_DELAY"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds a question waits for the guardian before its connection is given up."""

RELEASE_DELAY = 0.05
"""Seconds a ``RELEASE`` waits for a request to ride with before it goes out alone."""


class Answer(asyncio.Future[Any]):
    """The future of one answer: callbacks added without a ``context`` (a stream's) run when
    the channel settles it, instead of one event-loop step later; a task awaiting it (which
    passes its context) wakes as from any future.  A callback added once it is done is
    scheduled as usual, except on an answer made :meth:`ready` (the stream then takes it
    while it asks, as if its delegate had answered inline)."""

    def __init__(self, *, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._now: list[Callable[[Answer], object]] = []
        self._inline = False

    @classmethod
    def ready(cls, result: object, *, loop: asyncio.AbstractEventLoop) -> Answer:
        """An answer known already (a Finished the guardian sealed in advance)."""
        answer = cls(loop=loop)
        answer.set_result(result)
        answer._inline = True
        return answer

    def add_done_callback(self, fn: Callable[[Any], object], *, context: Any = None) -> None:
        if context is None and not self.done():
            self._now.append(fn)
        elif context is None and self._inline:
            _run(fn, self)
        else:
            super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: Callable[[Any], object]) -> int:
        kept = [f for f in self._now if f != fn]
        removed, self._now = len(self._now) - len(kept), kept
        return removed + super().remove_done_callback(fn)

    def settle(self, result: object) -> None:
        """Set ``result`` and run the waiting callbacks now."""
        self.set_result(result)
        self._run_now()

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        self._run_now()
        return True

    def _run_now(self) -> None:
        callbacks, self._now = self._now, []
        for fn in callbacks:
            _run(fn, self)


def _run(fn: Callable[[Any], object], future: asyncio.Future[Any]) -> None:
    """A callback's failure is reported as the event loop reports one, and stops nothing else."""
    try:
        fn(future)
    except Exception as exc:  # noqa: BLE001 - one connection's callback, not the channel's
        future.get_loop().call_exception_handler(
            {"message": "guardian answer callback failed", "exception": exc, "future": future})


class _Waiter(NamedTuple):
    future: asyncio.Future[Any]
    request: DelegateRequest | None
    """``None``: a raw exchange (``HELLO``), whose failure is raised, not answered."""
    then: Callable[[Any], None] | None
    deadline: float


class _Protocol(asyncio.BufferedProtocol):
    """The Unix-socket protocol of one channel connection: bytes straight to the channel, read
    into one buffer of its own (a fresh buffer per read would cost an mmap each time)."""

    def __init__(self, channel: GuardianChannel) -> None:
        self.channel = channel
        self.decoder = p.FrameDecoder()
        self.transport: asyncio.Transport | None = None
        self.buffer = memoryview(bytearray(p.RECV_SIZE))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream connection's transport is a Transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.channel._received(self, self.buffer[:nbytes])

    def connection_lost(self, exc: Exception | None) -> None:
        self.channel._lost(self, exc)


class GuardianChannel:
    """An asyncio client of one guardian (see the module docstring)."""

    MAX_DEFERRED = 64
    """``RELEASE`` requests held for the next request at most; then they go out alone."""

    def __init__(self, path: str | Path, *, timeout: float = DEFAULT_TIMEOUT,
                 tap: Callable[[str, bytes], None] | None = None) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.path = str(path)
        self.timeout = timeout
        self.tap = tap
        """``tap(direction, data)`` sees every byte sent (``"out"``) and received (``"in"``)."""
        self.info: p.Info | None = None
        self.on_restart: list[Callable[[], None]] = []
        self.reconnects = 0
        self.requests: Counter[str] = Counter()
        self.round_trips = 0
        self.bytes_out = 0
        """Bytes written to the guardian (every frame, ``RELEASE`` included)."""
        self.bytes_in = 0
        """Bytes read from the guardian."""
        self.asker = Asker()
        self._ids = itertools.count(1)
        self._proto: _Protocol | None = None
        self._pending: dict[int, _Waiter] = {}
        """Questions waiting for a reply, oldest first (so their deadlines are in order)."""
        self._timer: asyncio.TimerHandle | None = None
        self._deferred: list[bytes] = []
        """``RELEASE`` frames that go out with the next request."""
        self._release_timer: asyncio.TimerHandle | None = None
        self._connecting: asyncio.Lock | None = None

    # -- the channel -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        proto = self._proto
        return proto is not None and proto.transport is not None and not proto.transport.is_closing()

    async def connect(self) -> p.Info:
        """Open the channel if it is closed and identify the guardian; its ``Info``."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self.connected:
                assert self.info is not None
                return self.info
            loop = asyncio.get_running_loop()
            try:
                _, proto = await asyncio.wait_for(
                    loop.create_unix_connection(lambda: _Protocol(self), self.path), self.timeout)
            except (OSError, TimeoutError) as exc:
                raise GuardianUnavailable(f"cannot reach the guardian at {self.path}: {exc!r}") from None
            self._proto = proto  # closed already if the peer hung up at once: HELLO then fails
            reply = await self._exchange(p.Hello())
            if not isinstance(reply, p.Info):
                self.close()
                raise GuardianUnavailable(f"the guardian answered HELLO with {reply!r}")
            previous, self.info = self.info, reply
            if previous is not None:
                self.reconnects += 1
                self.asker.clear()
                for callback in list(self.on_restart):
                    callback()
            return reply

    async def chain(self) -> list[bytes]:
        """The guardian's certificate chain (DER, leaf first)."""
        return list((await self.connect()).chain)

    def close(self) -> None:
        """Send the deferred ``RELEASE`` frames and close the channel; waiting questions fail.
        Call it on the loop's thread, or once the loop has ended."""
        try:
            self._flush_deferred()
        except RuntimeError:  # the loop is closed
            pass
        proto, self._proto = self._proto, None
        try:
            if proto is not None and proto.transport is not None:
                proto.transport.close()
            self._fail_all(GuardianUnavailable("the guardian channel was closed"))
        except RuntimeError:  # the loop is closed: its sockets and futures went with it
            self._pending.clear()

    # -- questions -----------------------------------------------------------------------

    def ask(self, request: DelegateRequest,
            then: Callable[[Any], None] | None = None) -> asyncio.Future[Any]:
        """A future of the answer to one connection's question (an exception value on
        failure; it never raises).  ``then(answer)`` runs the moment the answer is known,
        before the future's callbacks (the host queues the guardian's own records there)."""
        loop = asyncio.get_running_loop()
        self.requests[request.op] += 1
        ready = self.asker.sealed_ahead(request)
        if ready is not None:
            if then is not None:
                then(ready)
            return Answer.ready(ready, loop=loop)
        if not self.connected:
            return loop.create_task(self._answer_later(request, then))
        future = Answer(loop=loop)
        self._send(self.asker.message_for(request), future, request, then)
        return future

    async def answer(self, request: DelegateRequest) -> Any:
        """:meth:`ask`, awaited."""
        return await self.ask(request)

    async def _answer_later(self, request: DelegateRequest,
                            then: Callable[[Any], None] | None) -> Any:
        """A question asked while the channel is closed: (re)connect, then ask."""
        answer: Any
        try:
            await self.connect()
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._send(self.asker.message_for(request), future, request, None)
            answer = await future
        except GuardianUnavailable as exc:
            answer = exc
        if then is not None:
            then(answer)
        return answer

    def release(self, handle: KeyHandle) -> None:
        """Tell the guardian to forget ``handle`` (nobody waits for the reply; best effort:
        a closed channel means the guardian freed the handle already).  The ``RELEASE`` rides
        with the next request (see the module docstring)."""
        self.asker.forget(handle.id)
        if not self.connected:
            return
        self.requests["release"] += 1
        self._deferred.append(p.message_frame(p.Release(handle.id), next(self._ids) & 0xFFFFFFFF))
        if len(self._deferred) >= self.MAX_DEFERRED:
            self._flush_deferred()
        elif self._release_timer is None:
            self._release_timer = asyncio.get_running_loop().call_later(
                RELEASE_DELAY, self._flush_deferred)

    async def _exchange(self, message: p.Message) -> object:
        """Send one request and wait (at most :attr:`timeout`) for its reply (raises)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._send(message, future, None, None)
        return await future

    # -- bytes ---------------------------------------------------------------------------

    def _send(self, message: p.Message, future: asyncio.Future[Any],
              request: DelegateRequest | None, then: Callable[[Any], None] | None) -> None:
        request_id = next(self._ids) & 0xFFFFFFFF
        loop = future.get_loop()
        waiter = self._pending[request_id] = _Waiter(future, request, then,
                                                     loop.time() + self.timeout)
        if self._timer is None:
            self._timer = loop.call_at(waiter.deadline, self._expire)
        self.round_trips += 1
        frame = p.message_frame(message, request_id)
        if self._deferred:
            self._cancel_release_timer()
            frame, self._deferred = b"".join([*self._deferred, frame]), []
        if not self._write(frame):
            # the channel closed before the request went out (the guardian went away between
            # the connection and this request): fail now, not after the time limit
            del self._pending[request_id]
            self._fail(waiter, GuardianUnavailable("the guardian channel is closed"))

    def _flush_deferred(self) -> None:
        """Send the deferred ``RELEASE`` frames now (best effort)."""
        self._cancel_release_timer()
        frames, self._deferred = self._deferred, []
        if frames:
            self._write(b"".join(frames))

    def _cancel_release_timer(self) -> None:
        if self._release_timer is not None:
            self._release_timer.cancel()
            self._release_timer = None

    def _write(self, frame: bytes) -> bool:
        """Write ``frame``; False if the channel is closed (nothing written)."""
        proto = self._proto
        if proto is None or proto.transport is None or proto.transport.is_closing():
            return False
        if self.tap is not None:
            self.tap("out", frame)
        self.bytes_out += len(frame)
        proto.transport.write(frame)
        return True

    def _received(self, proto: _Protocol, data: memoryview) -> None:
        """Settle the waiter of every whole reply in ``data`` (a view of the read buffer)."""
        if proto is not self._proto:
            return
        self.bytes_in += len(data)
        if self.tap is not None:
            self.tap("in", bytes(data))
        try:
            frames = proto.decoder.feed(data)
        except p.ProtocolError as exc:
            self._drop(GuardianProtocolError(f"malformed frame from the guardian: {exc}"))
            return
        pending = self._pending
        for frame in frames:
            waiter = pending.pop(frame.request_id, None)
            if waiter is None or waiter.future.done():
                continue  # a RELEASE's reply, or a request given up on
            try:
                reply: object = p.decode_message(frame)
            except p.ProtocolError as exc:
                reply = GuardianProtocolError(f"malformed reply: {exc}")
            self._resolve(waiter, reply)

    def _resolve(self, waiter: _Waiter, reply: object) -> None:
        future = waiter.future
        if waiter.request is not None:
            reply = (reply if isinstance(reply, GuardianUnavailable)
                     else self.asker.answer_from(waiter.request, reply))
            if waiter.then is not None:
                waiter.then(reply)
        if isinstance(future, Answer):
            future.settle(reply)
        else:
            future.set_result(reply)

    def _fail(self, waiter: _Waiter, why: GuardianUnavailable) -> None:
        if waiter.future.done():
            return
        if waiter.request is None:
            waiter.future.set_exception(why)
        else:
            self._resolve(waiter, why)

    def _expire(self) -> None:
        """The channel's timer: fail every question past its deadline; the timer then waits
        for the oldest question left."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now, pending, late = loop.time(), self._pending, []
        for request_id, waiter in pending.items():
            if waiter.deadline > now:
                self._timer = loop.call_at(waiter.deadline, self._expire)
                break
            late.append(request_id)
        for request_id in late:
            waiter = pending.pop(request_id)
            what = waiter.request.op if waiter.request is not None else "HELLO"
            self._fail(waiter, GuardianUnavailable(
                f"the guardian did not answer {what} within {self.timeout} s"))

    def _drop(self, why: GuardianUnavailable) -> None:
        logger.warning("guardian channel closed: %s", why)
        proto, self._proto = self._proto, None
        if proto is not None and proto.transport is not None:
            proto.transport.close()
        self._fail_all(why)

    def _lost(self, proto: _Protocol, exc: Exception | None) -> None:
        if proto is self._proto:
            self._drop(GuardianUnavailable(f"guardian channel lost: {exc!r}" if exc
                                           else "the guardian closed the channel"))

    def _fail_all(self, why: GuardianUnavailable) -> None:
        """Fail every waiting question; the deferred ``RELEASE`` frames go too (a closed
        channel freed their handles)."""
        self._deferred.clear()
        self._cancel_release_timer()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            self._fail(waiter, why)
