"""The host's end of the guardian channel: a :class:`tls12.delegate.SessionDelegate` over a socket.

:class:`RemoteDelegate` implements every delegate operation as one request/reply exchange with
the guardian process (:mod:`webalps_sim.protocol`), so a :class:`tls12.ServerConnection` given
it holds nothing but key handles::

    remote = RemoteDelegate("/run/guardian.sock")
    config = ServerConfig(credentials=Credentials.chain_only(remote.chain()), ...)
    conn = ServerConnection(config, delegate=remote)

Batching is the connection's (:mod:`tls12.delegate`): one ``SEAL`` per ``send_data`` and one
``OPEN`` per burst of buffered application records, so a round trip costs per flight, not per
record.  A full handshake takes one exchange when the client's ClientKeyExchange,
ChangeCipherSpec and Finished reach the host together (``DERIVE_FINISH``, see
:meth:`RemoteDelegate.derive_finish`), else three: ``DERIVE``, ``OPEN`` of the client's Finished
and ``FINISH``, which checks it, makes the server's and returns it sealed.  Records the guardian seals by itself -- its application answered a request -- come
back in an ``OPEN`` reply; :meth:`RemoteDelegate.attach` names, per handle, the callable that
queues them on the connection (:meth:`tls12.ServerConnection.queue_sealed`), and it is called
*before* ``open`` returns, so those records precede anything the connection writes next.

Calls are blocking and serialised by a lock (one guardian, one card): the host's event loop
waits for the guardian, as the paper's Apache process waits for the coprocessor.

Failures are typed.  :class:`GuardianUnavailable` -- the socket cannot be opened, or the guardian
died mid-request: the connection using it fails (its client sees the TLS connection drop), the
socket is dropped, and the next call reconnects.  A guardian that comes back is a new run
(``Info.run_id``): every handle of the old run is dead (:class:`GuardianUnavailable` again) and
the ``on_restart`` callbacks run (the host empties its session cache).  An ``ERROR`` reply is
:class:`GuardianRefused`; for ``OPEN``, a record the guardian would not open (bad MAC, wrong
sequence number) is :class:`RecordRejected`, a ``ValueError``, which the connection turns into a
``bad_record_mac`` alert.  ``tap(direction, data)``, if given, sees every byte sent (``"out"``)
and received (``"in"``) on the channel.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from tls12.delegate import DelegateError, FlightResult, KeyHandle
from tls12.messages import HandshakeType, frame_handshake
from tls12.record import ContentType, OutgoingRecord

from .. import protocol as p
from ..errors import WebAlpsError

__all__ = ["RemoteDelegate", "GuardianUnavailable", "GuardianRefused", "RecordRejected"]

SealedSink = Callable[[bytes, int, bool], None]
"""``sink(records, count, close)``: queue ``count`` sealed records; then close if ``close``."""


class GuardianUnavailable(WebAlpsError, DelegateError):
    """The guardian cannot be reached, died mid-request, or restarted and lost the handle."""


class GuardianRefused(WebAlpsError, DelegateError):
    """The guardian answered with an error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"guardian refused ({code}): {message}")
        self.code = code


class RecordRejected(WebAlpsError, ValueError):
    """The guardian would not open a record (one error for MAC, padding and sequence faults)."""


class RemoteDelegate:
    """A session delegate whose secrets live in the guardian process at ``path``."""

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
        """Called (no arguments) when the guardian came back as a new run."""
        self.reconnects = 0
        self._sock: socket.socket | None = None
        self._decoder = p.FrameDecoder()
        self._buffer = bytearray(p.RECV_SIZE)  # every read lands here: no allocation per read
        self._view = memoryview(self._buffer)
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._live: set[int] = set()
        self._sinks: dict[int, SealedSink] = {}
        self._unanswered: set[int] = set()  # requests whose replies nobody waits for (RELEASE)
        self._deferred: list[bytes] = []  # RELEASE frames that go out with the next request
        # handle: seq, version, message, sealed -- the server's Finished, sealed in advance
        self._finished: dict[int, tuple[int, int, bytes, bytes]] = {}

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
                    if previous.run_id != info.run_id:
                        self._live.clear()
                        self._sinks.clear()
                        self._finished.clear()
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

    def _send(self, message: object) -> int:
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

    def _exchange(self, message: object) -> object:
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

    def _call(self, message: object, expect: type, handle: KeyHandle | None = None) -> object:
        with self._lock:
            self.connect()
            if handle is not None and handle.id not in self._live:
                raise GuardianUnavailable(f"key handle {handle.id} was lost when the guardian restarted")
            reply = self._exchange(message)
        if isinstance(reply, p.Error):
            if reply.code in (p.ErrorCode.BAD_RECORD, p.ErrorCode.SEQUENCE) and isinstance(message, p.Open):
                raise RecordRejected("bad record MAC")
            raise GuardianRefused(reply.code, reply.message)
        if not isinstance(reply, expect):
            raise self._drop(f"{type(reply).__name__} in reply to {type(message).__name__}")
        return reply

    def _new_handle(self, reply: object) -> KeyHandle:
        assert isinstance(reply, p.HandleReply)
        self._live.add(reply.handle_id)
        return KeyHandle(reply.handle_id, reply.cipher_suite)

    # -- SessionDelegate -------------------------------------------------------------------

    def derive(self, encrypted_premaster: bytes, client_version: int, client_random: bytes,
               server_random: bytes, cipher_suite: int, session_hash: bytes | None) -> KeyHandle:
        message = p.Derive(encrypted_premaster, client_version, client_random, server_random,
                           cipher_suite, session_hash)
        return self._new_handle(self._call(message, p.HandleReply))

    def resume(self, session: KeyHandle, client_random: bytes, server_random: bytes) -> KeyHandle:
        message = p.Resume(session.id, session.cipher_suite, client_random, server_random)
        return self._new_handle(self._call(message, p.HandleReply, session))

    def verify_data(self, handle: KeyHandle, from_client: bool, transcript_hash: bytes) -> bytes:
        message = p.VerifyData(handle.id, handle.cipher_suite, from_client, transcript_hash)
        reply = self._call(message, p.DataReply, handle)
        return reply.data  # type: ignore[attr-defined, no-any-return]

    def check_finished(self, handle: KeyHandle, from_client: bool, transcript_hash: bytes,
                       verify_data: bytes) -> bool:
        message = p.CheckFinished(handle.id, handle.cipher_suite, from_client, transcript_hash,
                                  verify_data)
        return self._call(message, p.BoolReply, handle).value  # type: ignore[attr-defined, no-any-return]

    def finish(self, handle: KeyHandle, client_hash: bytes, client_verify_data: bytes,
               server_hash: bytes) -> bytes | None:
        """``check_finished`` + ``verify_data`` in one exchange (``tls12.delegate``).

        The reply also carries the server's Finished record, sealed; the :meth:`seal` that
        follows for exactly that record returns it without another round trip.
        """
        reply = self._call(p.Finish(handle.id, handle.cipher_suite, client_hash,
                                    client_verify_data, server_hash, 0x0303), p.FinishReply, handle)
        assert isinstance(reply, p.FinishReply)
        if not reply.ok:
            return None
        message = frame_handshake(HandshakeType.FINISHED, reply.verify_data)
        self._finished[handle.id] = (reply.seq, 0x0303, message, reply.sealed)
        return reply.verify_data

    def derive_finish(self, encrypted_premaster: bytes, client_version: int,
                      client_random: bytes, server_random: bytes, cipher_suite: int,
                      transcript: bytes, extended_master_secret: bool, record_version: int,
                      finished_fragment: bytes) -> FlightResult | None:
        """The client's whole flight in one exchange (``tls12.delegate.FlightDelegate``).

        The reply also carries the server's Finished record, sealed, kept for the :meth:`seal`
        that asks for it.  A record the guardian cannot open is :class:`RecordRejected`; a wrong
        Finished is ``None``; either way the guardian kept no handle.
        """
        message = p.DeriveFinish(encrypted_premaster, client_version, client_random,
                                 server_random, cipher_suite, extended_master_secret, transcript,
                                 record_version, finished_fragment)
        with self._lock:
            self.connect()
            reply = self._exchange(message)
        if isinstance(reply, p.Error):
            if reply.code == p.ErrorCode.BAD_RECORD:
                raise RecordRejected("bad record MAC")
            if reply.code == p.ErrorCode.BAD_FINISHED:
                return None
            raise GuardianRefused(reply.code, reply.message)
        if not isinstance(reply, p.DerivedReply):
            raise self._drop(f"{type(reply).__name__} in reply to DeriveFinish")
        handle = self._new_handle(p.HandleReply(reply.handle_id, reply.cipher_suite))
        ours = frame_handshake(HandshakeType.FINISHED, reply.verify_data)
        self._finished[handle.id] = (reply.seq, record_version, ours, reply.sealed)
        return FlightResult(handle, reply.client_finished, reply.verify_data)

    def seal(self, handle: KeyHandle, from_client: bool, records: Sequence[OutgoingRecord]) -> bytes:
        ready = self._finished.pop(handle.id, None)
        if ready is not None and not from_client and len(records) == 1:
            r = records[0]
            if (r.content_type, r.seq, r.version, r.plaintext) == (ContentType.HANDSHAKE, *ready[:3]):
                return ready[3]
        batch = tuple((r.content_type, r.version, r.seq, r.plaintext) for r in records)
        reply = self._call(p.Seal(handle.id, handle.cipher_suite, from_client, batch), p.Sealed,
                           handle)
        return reply.records  # type: ignore[attr-defined, no-any-return]

    def open(self, handle: KeyHandle, from_client: bool,
             records: Sequence[tuple[int, int, int, bytes]]) -> list[bytes]:
        reply = self._call(p.Open(handle.id, handle.cipher_suite, from_client, tuple(records)),
                           p.Opened, handle)
        assert isinstance(reply, p.Opened)
        if len(reply.plaintexts) != len(records):
            raise self._drop(f"{len(reply.plaintexts)} plaintexts for {len(records)} records")
        if reply.sealed_count:
            sink = self._sinks.get(handle.id)
            if sink is None:
                raise GuardianRefused(0, "the guardian answered a request on a connection "
                                         "that takes no sealed records")
            sink(reply.sealed, reply.sealed_count, reply.close)
        return list(reply.plaintexts)

    # -- handles ---------------------------------------------------------------------------

    def attach(self, handle: KeyHandle, sink: SealedSink) -> None:
        """Where the records the guardian seals by itself for ``handle`` go."""
        self._sinks[handle.id] = sink

    def release(self, handle: KeyHandle) -> None:
        """Forget ``handle`` here and in the guardian (best effort: a dead guardian forgot it).

        Nobody waits for the ``RELEASE``: it goes out in the same write as the next request (one
        guardian wake-up for both; at most :attr:`MAX_DEFERRED` wait, and :meth:`close` sends
        them), and its reply is dropped when that exchange reads it.
        """
        self._sinks.pop(handle.id, None)
        self._finished.pop(handle.id, None)
        with self._lock:
            if handle.id not in self._live or self._sock is None:
                return
            self._live.discard(handle.id)
            # no reply awaited: a closing connection should not wait for the guardian
            request_id = next(self._ids) & 0xFFFFFFFF
            self._deferred.append(p.message_frame(p.Release(handle.id), request_id))
            self._unanswered.add(request_id)
            if len(self._deferred) >= self.MAX_DEFERRED:
                self._flush_deferred()
