"""A blocking client of the guardian: a :class:`tls12.delegate.SessionDelegate` over its socket.

The WebALPS host itself does not use this class: it answers its connections' questions on the
event loop (:mod:`webalps_sim.aio.channel`).  :class:`RemoteDelegate` is the same protocol for
code that may block -- tests that play the host byte by byte, tools, a notebook -- and it turns
questions into requests and replies into answers with the same :class:`webalps_sim.questions.Asker`
as the asyncio channel.  Every :class:`tls12.delegate.SessionDelegate` method is one exchange,
serialised by a lock; :meth:`RemoteDelegate.answer` takes a :class:`tls12.delegate.DelegateRequest`
and returns the answer or the exception value, as an event-driven adapter supplies it.

:class:`WebALPSServerConnection` puts the two together for a test or a tool: a
:class:`tls12.ServerConnection` that asks by event, answered at once by a :class:`RemoteDelegate`
(the records the guardian seals by itself are queued before the plaintexts are supplied,
:func:`webalps_sim.questions.supply`).  It stands wherever :func:`tls12.testing.pipe` wants a
server.

Failures are typed (:mod:`webalps_sim.questions`).  :class:`GuardianUnavailable` -- the socket
cannot be opened, or the guardian died mid-request: the socket is dropped and the next call
reconnects, running the ``on_restart`` callbacks.  An ``ERROR`` reply is
:class:`GuardianRefused`; a record the guardian would not open is :class:`RecordRejected`, a
``ValueError``.  ``tap(direction, data)``, if given, sees every byte sent (``"out"``) and
received (``"in"``) on the channel.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tls12.config import ServerConfig
from tls12.delegate import DelegateRequest, EventDelegate, KeyHandle
from tls12.server_connection import ServerConnection
from tls12.testing import AnsweringServer

from .. import protocol as p
from ..questions import (
    Asker,
    GuardianProtocolError,
    GuardianRefused,
    GuardianUnavailable,
    HandleLost,
    RecordRejected,
    supply,
)

__all__ = ["RemoteDelegate", "WebALPSServerConnection", "GuardianUnavailable", "GuardianRefused",
           "HandleLost", "RecordRejected"]


class RemoteDelegate:
    """A session delegate whose secrets live in the guardian process at ``path`` (blocking)."""

    MAX_DEFERRED = 64
    """``RELEASE`` requests held for the next request at most; then they go out alone."""

    def __init__(self, path: str | Path, *, timeout: float = 60.0,
                 tap: Callable[[str, bytes], None] | None = None) -> None:
        """``timeout``: seconds a call may wait for the guardian before the channel is dropped."""
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.path = str(path)
        self.timeout = timeout
        self.tap = tap
        self.info: p.Info | None = None
        self.on_restart: list[Callable[[], None]] = []
        """Called (no arguments) whenever the channel is opened again (the handles are gone)."""
        self.reconnects = 0
        self.asker = Asker()
        self._sock: socket.socket | None = None
        self._decoder = p.FrameDecoder()
        self._buffer = bytearray(p.RECV_SIZE)  # every read lands here: no allocation per read
        self._view = memoryview(self._buffer)
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._unanswered: set[int] = set()  # requests whose replies nobody waits for (RELEASE)
        self._deferred: list[bytes] = []  # RELEASE frames that go out with the next request

    # -- channel ---------------------------------------------------------------------------

    def connect(self) -> p.Info:
        """Open the channel (if closed) and identify the guardian; returns its ``Info``."""
        with self._lock:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(self.timeout)
                try:
                    sock.connect(self.path)
                except OSError as exc:
                    sock.close()
                    raise GuardianUnavailable(f"cannot reach the guardian at {self.path}: {exc}") from None
                # blocking, with the timeout in the kernel (SO_RCVTIMEO): one system call per
                # read instead of Python's poll() + recv() of a socket with a timeout
                sock.settimeout(None)
                seconds = struct.pack("ll", int(self.timeout), int(self.timeout % 1 * 1e6))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, seconds)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, seconds)
                self._sock = sock
                self._decoder = p.FrameDecoder()
                self._unanswered.clear()
                self._deferred.clear()
                info = self._exchange(p.Hello())
                assert isinstance(info, p.Info)
                previous, self.info = self.info, info
                if previous is not None:
                    self.reconnects += 1
                    # a new run lost every handle; so did the same run, which frees the
                    # handles of a closed host connection
                    self.asker.clear()
                    for callback in list(self.on_restart):
                        callback()
            assert self.info is not None
            return self.info

    def check_alive(self) -> None:
        """Notice, without a round trip, a guardian that died since the last call, and reconnect.

        A closed peer shows as end-of-file on a non-blocking peek; the channel is then reopened
        (running ``on_restart`` if the guardian is a new run).  Call it before trusting a
        handle from an earlier connection, e.g. before resuming a cached session.
        """
        with self._lock:
            sock = self._sock
            if sock is not None:
                try:
                    dead = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    dead = False
                except OSError:
                    dead = True
                if dead:
                    self.close()
            self.connect()

    def chain(self) -> list[bytes]:
        """The guardian's certificate chain (DER, leaf first): all the host's credentials hold."""
        return list(self.connect().chain)

    def close(self) -> None:
        """Close the channel; deferred ``RELEASE`` requests are sent first (best effort)."""
        with self._lock:
            if self._sock is not None:
                self._flush_deferred()
                self._sock.close()
                self._sock = None

    def _flush_deferred(self) -> None:
        """Send the deferred ``RELEASE`` frames now, without waiting (lock held; best effort:
        a guardian that cannot be written to has lost the handles anyway)."""
        if self._deferred and self._sock is not None:
            frames, self._deferred = self._deferred, []
            try:
                if self.tap is not None:
                    for frame in frames:
                        self.tap("out", frame)
                self._sock.sendall(b"".join(frames))
            except OSError:
                pass

    def _drop(self, why: str) -> GuardianUnavailable:
        self.close()
        return GuardianUnavailable(f"guardian channel lost: {why}")

    def _send(self, message: p.Message) -> int:
        """Send one request, behind any deferred ``RELEASE`` frames, in one write (lock held,
        socket open); its request id."""
        sock = self._sock
        assert sock is not None
        request_id = next(self._ids) & 0xFFFFFFFF
        frame = p.message_frame(message, request_id)
        frames = [*self._deferred, frame] if self._deferred else [frame]
        self._deferred.clear()
        try:
            if self.tap is not None:
                for f in frames:
                    self.tap("out", f)
            sock.sendall(frame if len(frames) == 1 else b"".join(frames))
        except OSError as exc:
            raise self._drop(repr(exc)) from None
        return request_id

    def _exchange(self, message: p.Message) -> object:
        """Send one request, wait for its reply (lock held, socket open).

        Replies to requests sent with :meth:`_post` (nobody waits for them) are read and
        dropped on the way; any other reply must carry this request's id.
        """
        sock = self._sock
        assert sock is not None
        request_id = self._send(message)
        frames: list[p.Frame] = []
        try:
            while not frames:
                n = sock.recv_into(self._buffer)
                if not n:
                    raise self._drop("the guardian closed the connection")
                data = self._view[:n]
                if self.tap is not None:
                    self.tap("in", bytes(data))
                for frame in self._decoder.feed(data):
                    if frame.request_id in self._unanswered:
                        self._unanswered.discard(frame.request_id)
                    else:
                        frames.append(frame)
        except OSError as exc:
            raise self._drop(repr(exc)) from None
        except p.ProtocolError as exc:
            raise self._drop(f"malformed reply: {exc}") from None
        if len(frames) != 1 or self._decoder.buffered or frames[0].request_id != request_id:
            raise self._drop("reply out of step with the request")
        try:
            reply = p.decode_message(frames[0])
        except p.ProtocolError as exc:
            raise self._drop(f"malformed reply: {exc}") from None
        return reply

    # -- questions ---------------------------------------------------------------------

    def answer(self, request: DelegateRequest) -> Any:
        """The answer to a connection's question, or the exception value (never raises)."""
        ready = self.asker.sealed_ahead(request)
        if ready is not None:
            return ready
        try:
            message = self.asker.message_for(request)
            with self._lock:
                self.connect()
                reply = self._exchange(message)
        except GuardianUnavailable as exc:
            return exc
        answer = self.asker.answer_from(request, reply)
        if isinstance(answer, GuardianProtocolError):
            with self._lock:
                self.close()
        return answer

    def request(self, message: p.Message) -> object:
        """Send one guardian request as it is; the reply message (an ``Error`` too).  For tests
        and tools that speak the protocol directly."""
        with self._lock:
            self.connect()
            return self._exchange(message)

    def _ask(self, op: str, *args: Any, **kwargs: Any) -> Any:
        answer = self.answer(DelegateRequest(0, op, args, tuple(kwargs.items())))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    # -- SessionDelegate (each one exchange) --------------------------------------------------

    def derive(self, *args: Any, **kwargs: Any) -> KeyHandle:
        return self._ask("derive", *args, **kwargs)  # type: ignore[no-any-return]  # _ask is Any: the reply type depends on op

    def derive_finish(self, *args: Any, **kwargs: Any) -> Any:
        return self._ask("derive_finish", *args, **kwargs)

    def ephemeral(self, *args: Any) -> Any:
        return self._ask("ephemeral", *args)

    def resume(self, *args: Any) -> KeyHandle:
        return self._ask("resume", *args)  # type: ignore[no-any-return]  # _ask is Any: the reply type depends on op

    def verify_data(self, *args: Any) -> bytes:
        return self._ask("verify_data", *args)  # type: ignore[no-any-return]  # _ask is Any: the reply type depends on op

    def check_finished(self, *args: Any) -> bool:
        return self._ask("check_finished", *args)  # type: ignore[no-any-return]  # _ask is Any: the reply type depends on op

    def finish(self, *args: Any) -> bytes | None:
        return self._ask("finish", *args)  # type: ignore[no-any-return]  # _ask is Any: the reply type depends on op

    def seal(self, *args: Any) -> bytes:
        return self._ask("seal", *args)  # type: ignore[no-any-return]  # _ask is Any: the reply type depends on op

    def open(self, *args: Any) -> list[bytes]:
        """Plaintexts (a :class:`webalps_sim.questions.OpenAnswer`: with the records the
        guardian sealed by itself, which the caller must queue first)."""
        return self._ask("open", *args)  # type: ignore[no-any-return]  # _ask is Any: the reply type depends on op

    def release(self, handle: KeyHandle) -> None:
        """Forget ``handle`` here and in the guardian (best effort: a dead guardian forgot it).

        Nobody waits for the ``RELEASE``: it goes out in the same write as the next request (one
        guardian wake-up for both; at most :attr:`MAX_DEFERRED` wait, and :meth:`close` sends
        them), and its reply is dropped when that exchange reads it.
        """
        self.asker.forget(handle.id)
        with self._lock:
            if self._sock is None:
                return
            request_id = next(self._ids) & 0xFFFFFFFF
            self._deferred.append(p.message_frame(p.Release(handle.id), request_id))
            self._unanswered.add(request_id)
            if len(self._deferred) >= self.MAX_DEFERRED:
                self._flush_deferred()


class WebALPSServerConnection(AnsweringServer):
    """A host connection for tests and tools: asks by event, answered at once by a
    :class:`RemoteDelegate` (see the module docstring).  Any other attribute is the
    :class:`tls12.ServerConnection`'s."""

    def __init__(self, config: ServerConfig, *, delegate: RemoteDelegate) -> None:
        super().__init__(ServerConnection(config, delegate=EventDelegate()), delegate)

    def answer(self, request: DelegateRequest) -> list[Any]:
        """Answer by calling the delegate's method of that name (so a subclass of
        :class:`RemoteDelegate` may change how an operation is asked)."""
        if request in self.held:
            self.held.remove(request)
        try:
            answer = request.call(self.delegate)
        except Exception as exc:  # noqa: BLE001 - a failed operation is an answer too
            answer = exc
        return supply(self.conn, request, answer)
