"""The sans-IO connection base class shared by :class:`ServerConnection` and :class:`ClientConnection`.

A connection never touches a socket or a clock.  The application feeds it the
bytes that arrived (:meth:`Connection.receive_data`), reads the events that
they meant, and sends whatever :meth:`Connection.data_to_send` returns::

    conn = ServerConnection(ServerConfig(credentials=creds))
    for event in conn.receive_data(sock.recv(65536)):
        ...
    sock.sendall(conn.data_to_send())

The handshake is a state machine: a :class:`HandshakeState` enum and, per
role, a transition table mapping (state, handshake message type) to a handler
(see ``TRANSITIONS`` in the two subclasses).  Any (state, message) pair not in
the table is an ``unexpected_message``.  When the peer misbehaves the
connection queues the matching fatal alert, moves to ``CLOSED`` and raises a
:class:`tls12.errors.RemoteProtocolError`; the queued alert is still returned
by the next :meth:`data_to_send`.

Seams for the protocols built on this core (documented where they live):
1. :mod:`tls12.keys` -- private-key operations (premaster decryption, signing);
2. :mod:`tls12.record` -- the record writer, MAC without encryption, write keys;
3. :mod:`tls12.state` -- :meth:`Connection.export_state` / ``import_state``;
4. handshake customisation -- the ``_handle_*`` / ``_build_*`` methods of the
   subclasses are the points to override (Reverse SSL changes who signs and
   who encrypts by overriding the key-exchange steps).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from enum import Enum

from . import prf
from .errors import (
    AlertDescription,
    AlertLevel,
    DecodeError,
    DecryptError,
    LocalProtocolError,
    RemoteProtocolError,
    UnexpectedMessage,
)
from .events import AlertReceived, ApplicationData, ConnectionClosed, Event, HandshakeComplete
from .messages import TLS12, HandshakeType, frame_handshake, pull_handshake_header
from .record import (
    MAX_PLAINTEXT,
    ContentType,
    DirectionKeys,
    OutgoingRecord,
    RecordReader,
    RecordWriter,
    WriteProtection,
)
from .session import Session
from .suites import SUITES, SuiteParams

__all__ = ["Connection", "HandshakeState"]


class HandshakeState(Enum):
    # server
    EXPECT_CLIENT_HELLO = "expect_client_hello"
    EXPECT_CLIENT_KEY_EXCHANGE = "expect_client_key_exchange"
    # client
    EXPECT_SERVER_HELLO = "expect_server_hello"
    EXPECT_CERTIFICATE = "expect_certificate"
    EXPECT_SERVER_KEY_EXCHANGE = "expect_server_key_exchange"
    EXPECT_SERVER_HELLO_DONE = "expect_server_hello_done"
    # both
    EXPECT_CHANGE_CIPHER_SPEC = "expect_change_cipher_spec"
    EXPECT_FINISHED = "expect_finished"
    ESTABLISHED = "established"
    CLOSED = "closed"


Handler = Callable[["Connection", bytes], None]


class Connection:
    """Shared machinery: records, handshake reassembly, transcript, alerts, application data."""

    is_client: bool = False
    TRANSITIONS: dict[tuple[Enum, int], str] = {}
    """(state, handshake type) -> name of the handler method; filled by subclasses.

    States are :class:`HandshakeState` members; a protocol variant may add its
    own states as members of another ``Enum`` and list them here (Reverse SSL
    does), since the machinery only compares and looks them up."""

    def __init__(self, rng: Callable[[int], bytes], record_writer: RecordWriter | None = None) -> None:
        self._rng = rng
        self.record_writer = record_writer or RecordWriter()
        self.state: Enum = HandshakeState.CLOSED
        self._reader = RecordReader()
        self._write = WriteProtection(None, rng)
        self._output = bytearray()
        self._events: list[Event] = []
        self._hs_buffer = bytearray()
        self._transcript = bytearray()
        # negotiated parameters
        self.version = TLS12
        self.cipher_suite: int | None = None
        self.client_random = b""
        self.server_random = b""
        self.session_id = b""
        self.master_secret = b""
        self.extended_master_secret = False
        self.secure_renegotiation = False
        self.server_name: str | None = None
        self.resumed = False
        self.session: Session | None = None
        self._pending_read: DirectionKeys | None = None
        self._pending_write: DirectionKeys | None = None
        self._close_sent = False
        self._close_received = False
        self._handshake_done = False

    # --- public API -----------------------------------------------------

    @property
    def handshake_complete(self) -> bool:
        """True once both Finished messages were verified (and still after a later close)."""
        return self._handshake_done

    @property
    def closed(self) -> bool:
        return self.state is HandshakeState.CLOSED

    @property
    def suite_params(self) -> SuiteParams | None:
        return SUITES.get(self.cipher_suite) if self.cipher_suite is not None else None  # type: ignore[call-overload]

    @property
    def write_protection(self) -> WriteProtection:
        """The current write epoch: keys (encryption key and IV only through it), MAC computation."""
        return self._write

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes from the peer; ``b""`` means the transport reached end of file."""
        if self.state is HandshakeState.CLOSED:
            return []
        if not data:
            self.state = HandshakeState.CLOSED
            return [ConnectionClosed(clean=False)]
        self._reader.feed(data)
        try:
            while self.state is not HandshakeState.CLOSED:
                record = self._reader.next_record()
                if record is None:
                    break
                self._handle_record(*record)
        except RemoteProtocolError as exc:
            self._fatal(exc.description)
            # events decoded before the error (authenticated data) stay available on the exception
            exc.events = self._events
            self._events = []
            raise
        events, self._events = self._events, []
        return events

    def send_data(self, data: bytes) -> None:
        """Queue application data, fragmented into records of at most 2^14 bytes."""
        if self.state is not HandshakeState.ESTABLISHED or self._close_sent:
            raise LocalProtocolError(f"cannot send application data in state {self.state.value}")
        chunks = [bytes(data[i : i + MAX_PLAINTEXT]) for i in range(0, len(data), MAX_PLAINTEXT)]
        self._write_records(ContentType.APPLICATION_DATA, chunks or [b""])

    def close(self) -> None:
        """Queue a close_notify alert (RFC 5246 §7.2.1); idempotent."""
        if not self._close_sent:
            self._send_alert(AlertLevel.WARNING, AlertDescription.CLOSE_NOTIFY)
            self._close_sent = True
        if self._close_received:
            self.state = HandshakeState.CLOSED

    def abort(self, description: AlertDescription = AlertDescription.INTERNAL_ERROR) -> None:
        """Give up on the connection: queue a fatal alert (protected if keys are in use) and close.

        For the application's own reasons, e.g. an adapter's handshake timeout
        (``handshake_failure``) or a server shutting down (``user_canceled`` is a
        warning; use ``close()`` for an orderly end).
        """
        self._fatal(description)

    def data_to_send(self) -> bytes:
        out = bytes(self._output)
        self._output.clear()
        return out

    # --- records ----------------------------------------------------------

    def _write_records(self, content_type: int, fragments: list[bytes]) -> None:
        records = [
            OutgoingRecord(content_type, self.version, self._write.next_seq(), f) for f in fragments
        ]
        self._output += self.record_writer.write_records(records, self._write)

    def _send_alert(self, level: AlertLevel, description: AlertDescription) -> None:
        self._write_records(ContentType.ALERT, [bytes((level, description))])

    def _fatal(self, description: AlertDescription) -> None:
        if self.state is not HandshakeState.CLOSED and not self._close_sent:
            try:
                self._send_alert(AlertLevel.FATAL, description)
            except Exception:  # noqa: BLE001 - the alert is best effort; we are closing anyway
                pass
            self._close_sent = True
        self.state = HandshakeState.CLOSED

    def _handle_record(self, content_type: int, fragment: bytes) -> None:
        if content_type == ContentType.HANDSHAKE:
            if not fragment:
                raise UnexpectedMessage("empty handshake record")
            self._hs_buffer += fragment
            self._drain_handshake()
        elif content_type == ContentType.CHANGE_CIPHER_SPEC:
            self._handle_change_cipher_spec(fragment)
        elif content_type == ContentType.ALERT:
            if self._hs_buffer:
                raise UnexpectedMessage("alert interleaved with a handshake message")
            self._handle_alert(fragment)
        elif content_type == ContentType.APPLICATION_DATA:
            if self.state is not HandshakeState.ESTABLISHED or self._hs_buffer:
                raise UnexpectedMessage("application data before the handshake completed")
            if fragment:
                self._events.append(ApplicationData(fragment))

    def _drain_handshake(self) -> None:
        """Reassemble handshake messages from the buffered fragments and dispatch them.

        A message is judged as early as its bytes allow, so that a peer cannot
        make the connection buffer what it will refuse anyway: its type as
        soon as the first byte is in (``unexpected_message`` if the state
        does not expect it, the order OpenSSL checks in), its length as soon
        as the 4-byte header is in (``decode_error`` above
        :func:`tls12.messages.max_handshake_body`).  At most one message of
        at most that size is buffered.
        """
        while self.state is not HandshakeState.CLOSED and self._hs_buffer:
            if not self._expects_handshake(self._hs_buffer[0]):
                raise self._unexpected_handshake(self._hs_buffer[0])
            header = pull_handshake_header(self._hs_buffer)
            if header is None:
                return
            msg_type, length = header
            if len(self._hs_buffer) < 4 + length:
                return
            raw = bytes(self._hs_buffer[: 4 + length])
            del self._hs_buffer[: 4 + length]
            self._handle_handshake_message(msg_type, raw)

    def _expects_handshake(self, msg_type: int) -> bool:
        """Whether a handshake message of ``msg_type`` may arrive in the current state."""
        if msg_type == HandshakeType.HELLO_REQUEST and self.is_client:
            return True
        if self.state is HandshakeState.ESTABLISHED and not self.is_client and msg_type == HandshakeType.CLIENT_HELLO:
            return True
        return (self.state, msg_type) in self.TRANSITIONS

    def _unexpected_handshake(self, msg_type: int) -> UnexpectedMessage:
        name = HandshakeType(msg_type).name if msg_type in HandshakeType._value2member_map_ else msg_type
        return UnexpectedMessage(f"handshake message {name} in state {self.state.value}")

    def _handle_handshake_message(self, msg_type: int, raw: bytes) -> None:
        if msg_type == HandshakeType.HELLO_REQUEST and self.is_client:
            if len(raw) != 4:
                raise DecodeError("HelloRequest has an empty body")
            if self.state is HandshakeState.ESTABLISHED:  # renegotiation is refused
                self._send_alert(AlertLevel.WARNING, AlertDescription.NO_RENEGOTIATION)
            return  # ignored during a handshake, never hashed (RFC 5246 §7.4.1.1)
        if self.state is HandshakeState.ESTABLISHED and not self.is_client and msg_type == HandshakeType.CLIENT_HELLO:
            self._send_alert(AlertLevel.WARNING, AlertDescription.NO_RENEGOTIATION)
            return
        handler = self.TRANSITIONS.get((self.state, msg_type))
        if handler is None:
            raise self._unexpected_handshake(msg_type)
        getattr(self, handler)(raw)

    def _send_handshake(self, *messages: tuple[int, bytes]) -> None:
        """Frame, hash and send a flight, coalescing messages into as few records as possible."""
        flight = b""
        for msg_type, body in messages:
            framed = frame_handshake(msg_type, body)
            self._transcript += framed
            flight += framed
        chunks = [flight[i : i + MAX_PLAINTEXT] for i in range(0, len(flight), MAX_PLAINTEXT)]
        self._write_records(ContentType.HANDSHAKE, chunks)

    def _handle_change_cipher_spec(self, fragment: bytes) -> None:
        """Switch the read side to the pending keys (RFC 5246 §7.1).

        The record must hold exactly the single byte 1.  Anything else --
        empty, longer, another value -- is not the message §7.1 defines but
        an inappropriate one, so ``unexpected_message``: what OpenSSL 3 and
        GnuTLS send for it (BoringSSL sends ``illegal_parameter``).  It is
        not ``decode_error``: no length field inside a message is wrong.
        """
        if fragment != b"\x01":
            raise UnexpectedMessage(f"ChangeCipherSpec record of {len(fragment)} bytes is not the single byte 1")
        if self.state is not HandshakeState.EXPECT_CHANGE_CIPHER_SPEC or self._hs_buffer:
            raise UnexpectedMessage(f"ChangeCipherSpec in state {self.state.value}")
        if self._pending_read is None:
            raise UnexpectedMessage("ChangeCipherSpec before keys were agreed")
        self._reader.set_keys(self._pending_read)
        self._pending_read = None
        self.state = HandshakeState.EXPECT_FINISHED

    def _send_change_cipher_spec(self) -> None:
        self._write_records(ContentType.CHANGE_CIPHER_SPEC, [b"\x01"])
        self._write = WriteProtection(self._pending_write, self._rng)
        self._pending_write = None

    def _handle_alert(self, fragment: bytes) -> None:
        if len(fragment) != 2:
            raise DecodeError("alert record must be two bytes")
        level, description = fragment[0], fragment[1]
        try:
            desc: AlertDescription | int = AlertDescription(description)
        except ValueError:
            desc = description
        if description == AlertDescription.CLOSE_NOTIFY:
            self._close_received = True
            if not self._close_sent:
                self._send_alert(AlertLevel.WARNING, AlertDescription.CLOSE_NOTIFY)
                self._close_sent = True
            self.state = HandshakeState.CLOSED
            self._events.append(ConnectionClosed(clean=True, description=desc))
            return
        try:
            lvl = AlertLevel(level)
        except ValueError:
            raise DecodeError(f"unknown alert level {level}") from None
        self._events.append(AlertReceived(lvl, desc))
        if lvl is AlertLevel.FATAL:
            self._close_sent = True  # no alert in answer to a fatal alert
            self.state = HandshakeState.CLOSED
            self._events.append(ConnectionClosed(clean=False, description=desc))

    # --- key schedule -----------------------------------------------------

    def _derive_keys(self) -> None:
        params = self.suite_params
        assert params is not None
        block = prf.key_block(
            self.master_secret,
            self.client_random,
            self.server_random,
            params.mac_length,
            params.key_length,
            params.fixed_iv_length,
        )
        client = DirectionKeys(params, block.client_key, block.client_mac_key, block.client_iv)
        server = DirectionKeys(params, block.server_key, block.server_mac_key, block.server_iv)
        self._pending_write, self._pending_read = (client, server) if self.is_client else (server, client)

    def _set_premaster(self, premaster: bytes) -> None:
        """Master secret from the premaster (RFC 7627 when negotiated), then the pending keys.

        Call it once the ClientKeyExchange (or a variant's key-transport message)
        is in the transcript: the extended master secret hashes the transcript up
        to and including that message.
        """
        if self.extended_master_secret:
            self.master_secret = prf.extended_master_secret(premaster, prf.transcript_hash(bytes(self._transcript)))
        else:
            self.master_secret = prf.master_secret(premaster, self.client_random, self.server_random)
        self._derive_keys()

    def _finished_body(self, from_client: bool) -> bytes:
        return prf.verify_data(self.master_secret, from_client, prf.transcript_hash(bytes(self._transcript)))

    def _check_finished(self, raw: bytes) -> None:
        """Verify the peer's Finished against the transcript so far, then hash it."""
        expected = self._finished_body(not self.is_client)
        if len(raw) != 16:
            raise DecodeError("Finished body must be 12 bytes")
        if not hmac.compare_digest(raw[4:], expected):
            raise DecryptError("Finished verify_data mismatch")
        self._transcript += raw

    def _complete(self) -> None:
        self.state = HandshakeState.ESTABLISHED
        self._handshake_done = True
        self._reader.version = self.version
        assert self.cipher_suite is not None
        self._events.append(
            HandshakeComplete(
                cipher_suite=self.cipher_suite,
                session_id=self.session_id,
                resumed=self.resumed,
                extended_master_secret=self.extended_master_secret,
                server_name=self.server_name,
            )
        )

    # --- seam 3: state export/import (implemented in tls12.state) ----------

    def export_state(self) -> bytes:
        """Serialise the whole connection so another process can continue it (contains keys!)."""
        from .state import export_connection

        return export_connection(self)
