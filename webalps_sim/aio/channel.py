"""The host's asyncio channel to its guardian: many questions in flight, answered by request id.

A WebALPS host runs every client connection as a :class:`tls12.ServerConnection` that asks its
delegate by event (:class:`tls12.delegate.EventDelegate`).  :class:`GuardianChannel` answers
those questions over the guardian's Unix socket without ever blocking the event loop::

    channel = GuardianChannel("/run/guardian.sock", timeout=30.0)
    await channel.connect()                       # HELLO: the chain, the run id
    answer = await channel.answer(request)        # a DelegateRequest -> its answer

* **Pipelined, without a task per question.**  Each request gets an id (:mod:`webalps_sim.protocol`
  frames carry one) and goes out at once; the channel's protocol object decodes replies as they
  arrive and resolves the future of each id in the same step (:meth:`GuardianChannel.ask`
  returns that future), so requests of many connections are in flight together and may be
  answered in any order, and an answer reaches its connection one event-loop step after its
  bytes arrive.  A time limit is a timer on the loop, not a task.
* **Bounded waiting.**  ``answer`` waits at most ``timeout`` seconds; then it returns
  :class:`GuardianUnavailable` (the connection that asked ends with ``internal_error``, every
  other connection goes on).  A late reply is dropped.  A frozen guardian (SIGSTOP) therefore
  stalls only the connections that wait for it: the others, and plain HTTP in the same
  process, are served; when the guardian resumes, the waiting connections are answered.
* **Failures are values.**  ``answer`` never raises: a refused request, a lost channel or a
  malformed reply is an exception *value* (:mod:`webalps_sim.questions`), which the stream
  supplies to the connection.  A guardian that died is reconnected on the next request; every
  reconnection runs the ``on_restart`` callbacks (the guardian frees the handles of a closed
  host connection, so the host's session cache is emptied: the next resumptions are full
  handshakes).
* **Counted.**  :attr:`GuardianChannel.requests` counts requests per operation, and
  :attr:`GuardianChannel.round_trips` the requests that went to the guardian (a server Finished
  sealed in advance is answered here without one).
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

__all__ = ["GuardianChannel", "DEFAULT_TIMEOUT"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds a question waits for the guardian before its connection is given up."""


class _Waiter(NamedTuple):
    future: asyncio.Future[Any]
    request: DelegateRequest | None
    """``None``: a raw exchange (``HELLO``), whose failure is raised, not answered."""
    then: Callable[[Any], None] | None
    timer: asyncio.TimerHandle


class _Protocol(asyncio.Protocol):
    """The Unix-socket protocol of one channel connection: bytes straight to the channel."""

    def __init__(self, channel: GuardianChannel) -> None:
        self.channel = channel
        self.decoder = p.FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream connection's transport is a Transport

    def data_received(self, data: bytes) -> None:
        self.channel._received(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.channel._lost(self, exc)


class GuardianChannel:
    """An asyncio client of one guardian (see the module docstring)."""

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
        self.asker = Asker()
        self._ids = itertools.count(1)
        self._proto: _Protocol | None = None
        self._pending: dict[int, _Waiter] = {}
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
        """Close the channel; waiting questions fail.  Call it on the loop's thread, or once
        the loop has ended."""
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
        if ready is not None or not self.connected:
            return loop.create_task(self._answer_later(request, ready, then))
        future: asyncio.Future[Any] = loop.create_future()
        self._send(self.asker.message_for(request), future, request, then)
        return future

    async def answer(self, request: DelegateRequest) -> Any:
        """:meth:`ask`, awaited."""
        return await self.ask(request)

    async def _answer_later(self, request: DelegateRequest, ready: bytes | None,
                            then: Callable[[Any], None] | None) -> Any:
        """A question answered without waiting (``ready``) or after (re)connecting."""
        if ready is None:
            try:
                await self.connect()
                future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                self._send(self.asker.message_for(request), future, request, None)
                ready = await future
            except GuardianUnavailable as exc:
                ready = exc  # type: ignore[assignment]  # from here on ready is the answer, the error included
        if then is not None:
            then(ready)
        return ready

    def release(self, handle: KeyHandle) -> None:
        """Tell the guardian to forget ``handle`` (nobody waits for the reply; best effort:
        a closed channel means the guardian freed the handle already)."""
        self.asker.forget(handle.id)
        if self.connected:
            self.requests["release"] += 1
            self._write(p.message_frame(p.Release(handle.id), next(self._ids) & 0xFFFFFFFF))

    async def _exchange(self, message: p.Message) -> object:
        """Send one request and wait (at most :attr:`timeout`) for its reply (raises)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._send(message, future, None, None)
        return await future

    # -- bytes ---------------------------------------------------------------------------

    def _send(self, message: p.Message, future: asyncio.Future[Any],
              request: DelegateRequest | None, then: Callable[[Any], None] | None) -> None:
        request_id = next(self._ids) & 0xFFFFFFFF
        timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, request_id)
        waiter = self._pending[request_id] = _Waiter(future, request, then, timer)
        self.round_trips += 1
        if not self._write(p.message_frame(message, request_id)):
            # the channel closed before the request went out (the guardian went away between
            # the connection and this request): fail now, not after the time limit
            del self._pending[request_id]
            self._fail(waiter, GuardianUnavailable("the guardian channel is closed"))

    def _write(self, frame: bytes) -> bool:
        """Write ``frame``; False if the channel is closed (nothing written)."""
        proto = self._proto
        if proto is None or proto.transport is None or proto.transport.is_closing():
            return False
        if self.tap is not None:
            self.tap("out", frame)
        proto.transport.write(frame)
        return True

    def _received(self, proto: _Protocol, data: bytes) -> None:
        """Resolve the waiter of every whole reply in ``data``."""
        if proto is not self._proto:
            return
        if self.tap is not None:
            self.tap("in", data)
        try:
            frames = proto.decoder.feed(data)
        except p.ProtocolError as exc:
            self._drop(GuardianProtocolError(f"malformed frame from the guardian: {exc}"))
            return
        for frame in frames:
            waiter = self._pending.pop(frame.request_id, None)
            if waiter is None or waiter.future.done():
                continue  # a RELEASE's reply, or a request given up on
            waiter.timer.cancel()
            try:
                reply: object = p.decode_message(frame)
            except p.ProtocolError as exc:
                reply = GuardianProtocolError(f"malformed reply: {exc}")
            self._resolve(waiter, reply)

    def _resolve(self, waiter: _Waiter, reply: object) -> None:
        if waiter.request is None:
            waiter.future.set_result(reply)
            return
        answer = (reply if isinstance(reply, GuardianUnavailable)
                  else self.asker.answer_from(waiter.request, reply))
        if waiter.then is not None:
            waiter.then(answer)
        waiter.future.set_result(answer)

    def _fail(self, waiter: _Waiter, why: GuardianUnavailable) -> None:
        waiter.timer.cancel()
        if waiter.future.done():
            return
        if waiter.request is None:
            waiter.future.set_exception(why)
        else:
            self._resolve(waiter, why)

    def _expire(self, request_id: int) -> None:
        waiter = self._pending.pop(request_id, None)
        if waiter is not None:
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
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            self._fail(waiter, why)
