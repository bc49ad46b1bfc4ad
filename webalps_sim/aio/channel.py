"""The host's asyncio channel to its guardian: many questions in flight, answered by request id.

A WebALPS host runs every client connection as a :class:`tls12.ServerConnection` that asks its
delegate by event (:class:`tls12.delegate.EventDelegate`).  :class:`GuardianChannel` answers
those questions over the guardian's Unix socket without ever blocking the event loop::

    channel = GuardianChannel("/run/guardian.sock", timeout=30.0)
    await channel.connect()                       # HELLO: the chain, the run id
    answer = await channel.answer(request)        # a DelegateRequest -> its answer

* **Pipelined.**  Each request gets an id (:mod:`webalps_sim.protocol` frames carry one); a
  reader task hands each reply to the future waiting for that id, so requests of many
  connections are in flight at once and may be answered in any order.  Frames issued in the
  same turn of the event loop go out in one write (one guardian wake-up).
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
from typing import Any

from tls12.delegate import DelegateRequest, KeyHandle

from .. import protocol as p
from ..questions import Asker, GuardianProtocolError, GuardianUnavailable

__all__ = ["GuardianChannel", "DEFAULT_TIMEOUT"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
"""Seconds a question waits for the guardian before its connection is given up."""


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
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[object]] = {}
        self._out: list[bytes] = []
        self._connecting: asyncio.Lock | None = None

    # -- the channel -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> p.Info:
        """Open the channel if it is closed and identify the guardian; its ``Info``."""
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self.connected:
                assert self.info is not None
                return self.info
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(self.path, limit=p.MAX_FRAME + p.HEADER.size),
                    self.timeout)
            except (OSError, TimeoutError) as exc:
                raise GuardianUnavailable(f"cannot reach the guardian at {self.path}: {exc!r}") from None
            self._writer = writer
            self._reader_task = asyncio.get_running_loop().create_task(self._read(reader, writer))
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
        """Close the channel (queued ``RELEASE`` frames go first); waiting questions fail.
        Call it on the loop's thread, or once the loop has ended."""
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                self._send_now(writer)
                writer.close()
            task, self._reader_task = self._reader_task, None
            if task is not None:
                task.cancel()
        except RuntimeError:  # the loop is closed: its sockets went with it
            pass
        self._fail_all(GuardianUnavailable("the guardian channel was closed"))

    # -- questions -----------------------------------------------------------------------

    async def answer(self, request: DelegateRequest) -> Any:
        """The answer to one connection's question, or an exception value (never raises)."""
        self.requests[request.op] += 1
        ready = self.asker.sealed_ahead(request)
        if ready is not None:
            return ready
        try:
            message = self.asker.message_for(request)
            reply = await self._exchange(message)
        except GuardianUnavailable as exc:
            return exc
        return self.asker.answer_from(request, reply)

    def release(self, handle: KeyHandle) -> None:
        """Tell the guardian to forget ``handle`` (nobody waits for the reply; best effort:
        a closed channel means the guardian freed the handle already)."""
        self.asker.forget(handle.id)
        if self.connected:
            self.requests["release"] += 1
            self._queue(p.message_frame(p.Release(handle.id), next(self._ids) & 0xFFFFFFFF))

    async def _exchange(self, message: p.Message) -> object:
        """Send one request and wait (at most :attr:`timeout`) for its reply."""
        if not self.connected and not isinstance(message, p.Hello):
            await self.connect()
        request_id = next(self._ids) & 0xFFFFFFFF
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self.round_trips += 1
        self._queue(p.message_frame(message, request_id))
        try:
            return await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            raise GuardianUnavailable(
                f"the guardian did not answer {type(message).__name__} within {self.timeout} s") from None
        finally:
            self._pending.pop(request_id, None)

    # -- bytes ---------------------------------------------------------------------------

    def _queue(self, frame: bytes) -> None:
        """Write ``frame`` with every other frame of this turn of the loop, in one write."""
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(frame)

    def _flush(self) -> None:
        if self._writer is not None:
            self._send_now(self._writer)
        else:
            self._out.clear()

    def _send_now(self, writer: asyncio.StreamWriter) -> None:
        frames, self._out = self._out, []
        if not frames or writer.is_closing():
            return
        data = b"".join(frames)
        if self.tap is not None:
            self.tap("out", data)
        writer.write(data)

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Hand every reply to the future of its request id; on EOF or garbage, fail them all."""
        decoder = p.FrameDecoder()
        why: GuardianUnavailable = GuardianUnavailable("the guardian closed the channel")
        try:
            while data := await reader.read(p.RECV_SIZE):
                if self.tap is not None:
                    self.tap("in", data)
                for frame in decoder.feed(data):
                    future = self._pending.pop(frame.request_id, None)
                    if future is None or future.done():
                        continue  # a RELEASE's reply, or a request given up on
                    try:
                        future.set_result(p.decode_message(frame))
                    except p.ProtocolError as exc:
                        future.set_result(GuardianProtocolError(f"malformed reply: {exc}"))
        except p.ProtocolError as exc:
            why = GuardianProtocolError(f"malformed frame from the guardian: {exc}")
        except (ConnectionError, OSError) as exc:
            why = GuardianUnavailable(f"guardian channel lost: {exc!r}")
        logger.warning("guardian channel closed: %s", why)
        if self._writer is writer:
            self._writer = None
        writer.close()
        self._fail_all(why)

    def _fail_all(self, why: GuardianUnavailable) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(why)
