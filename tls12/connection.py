"""The sans-IO connection base class shared by :class:`ServerConnection` and :class:`ClientConnection`.

A connection never touches a socket or a clock.  The application feeds it the
bytes that arrived (:meth:`Connection.receive_data`), reads the events that
they meant, and sends whatever :meth:`Connection.data_to_send` returns::

    conn = ServerConnection(ServerConfig(credentials=creds))
    for event in conn.receive_data(sock.recv(65536)):
        ...
    sock.sendall(conn.data_to_send())

The handshake is a state machine: a :class:`HandshakeState` enum and, per
role, a :class:`tls12.handshake_table.TransitionTable` (``TRANSITIONS``)
mapping (state, input) to a handler and the states it may lead to.  Inputs
are handshake messages and the other record types (ChangeCipherSpec, alerts,
application data), so every byte the peer sends is judged by one table.  This
class does what every entry needs: it refuses an input the table does not
list (``unexpected_message``), hashes the handshake message into the
transcript, calls the handler and enters the state it returns after checking
that the table allows it.  ``docs/tls12-state-machine.md`` is generated from
the tables.  When the peer misbehaves the connection queues the matching
fatal alert, moves to ``CLOSED`` and raises a
:class:`tls12.errors.RemoteProtocolError`; the queued alert is still returned
by the next :meth:`data_to_send`.

Seams for the protocols built on this core (documented where they live):
1. :mod:`tls12.keys` -- private-key operations (premaster decryption, signing);
2. :mod:`tls12.record` -- the record writer, MAC without encryption, write keys;
3. :mod:`tls12.state` -- :meth:`Connection.export_state` / ``import_state``,
   and for mirrors the compact :meth:`Connection.export_keys` plus
   :meth:`Connection.export_progress` deltas, record boundaries of the output
   (:meth:`Connection.data_to_send_records`) and input consumed one record at
   a time (:meth:`Connection.receive_record`);
4. handshake customisation -- the ``_handle_*`` / ``_build_*`` methods of the
   subclasses are the points to override, ``TRANSITIONS.extend(...)`` adds
   messages and states, and a subclass of the role's handshake context
   (:mod:`tls12.context`) holds new fields (Reverse SSL does all three);
5. :mod:`tls12.delegate` -- a session-crypto delegate: the server holds key
   handles, never the premaster, master secret or record keys (WebALPS).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from . import prf
from .buffer import Buffer
from .context import ContextAttribute, HandshakeContext
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
from .handshake_table import ANY_STATE, SAME, RecordInput, Transition, TransitionTable
from .keyjson import keys_from_json, keys_to_json
from .messages import Finished, HandshakeType, frame_handshake, pull_handshake_header
from .record import (
    IV_KEY_LABEL,
    MAX_PLAINTEXT,
    ContentType,
    DirectionKeys,
    OutgoingRecord,
    RecordReader,
    RecordWriter,
    WriteProtection,
)
from .suites import SUITES, SuiteParams

if TYPE_CHECKING:
    from .delegate import KeyHandle, SessionDelegate
    from .state import Progress

__all__ = [
    "Connection",
    "HandshakeState",
    "COMMON_TRANSITIONS",
    "ReceivedRecord",
    "keys_to_json",
    "keys_from_json",
]


class HandshakeState(Enum):
    """Where a connection is in the handshake: the input it waits for next.

    The values are what :mod:`tls12.state` exports; a protocol variant adds
    states in an ``Enum`` of its own, registered with
    :func:`tls12.state.register_state_enum`.
    """

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


COMMON_TRANSITIONS = TransitionTable(
    {
        (HandshakeState.EXPECT_CHANGE_CIPHER_SPEC, RecordInput.CHANGE_CIPHER_SPEC): Transition(
            "_handle_change_cipher_spec", (HandshakeState.EXPECT_FINISHED,)
        ),
        (ANY_STATE, RecordInput.ALERT): Transition("_handle_alert", (SAME, HandshakeState.CLOSED)),
        (HandshakeState.ESTABLISHED, RecordInput.APPLICATION_DATA): Transition(
            "_handle_application_data", (HandshakeState.ESTABLISHED,)
        ),
    }
)
"""The entries both roles share: ChangeCipherSpec, alerts, application data."""

_APPLICATION_DATA_RECORD = int(ContentType.APPLICATION_DATA)
_HANDSHAKE_RECORD = int(ContentType.HANDSHAKE)
_ALERT_RECORD = int(ContentType.ALERT)
_APPLICATION_DATA = RecordInput.APPLICATION_DATA
_RECORD_TYPES = frozenset(int(c) for c in ContentType)


@dataclass(frozen=True, slots=True)
class ReceivedRecord:
    """One record handled by :meth:`Connection.receive_record`."""

    wire_length: int
    """Bytes the record took on the wire, 5-byte header included."""
    read_seq: int
    """The read sequence number after it (what a checkpoint at this boundary exports)."""
    events: list[Event]
    """What the record meant (often nothing: a part of a handshake message)."""


class Connection:
    """Shared machinery: records, handshake reassembly, transcript, alerts, application data."""

    is_client: bool = False
    CONTEXT: type[HandshakeContext] = HandshakeContext
    """The handshake-context dataclass of this role; a protocol variant names its subclass here."""
    TRANSITIONS: TransitionTable = COMMON_TRANSITIONS
    """(state, input) -> :class:`tls12.handshake_table.Transition`; extended by subclasses.

    States are :class:`HandshakeState` members; a protocol variant may add its
    own states as members of another ``Enum`` and list them here (Reverse SSL
    does), since the machinery only compares and looks them up."""

    def __init__(self, rng: Callable[[int], bytes], record_writer: RecordWriter | None = None) -> None:
        self._rng = rng
        self.record_writer = record_writer or RecordWriter()
        self.state: Enum = HandshakeState.CLOSED
        self.context: HandshakeContext = self.CONTEXT()
        """Everything the handshake negotiated or carries between messages (:mod:`tls12.context`)."""
        self._reader = RecordReader()
        self._write = WriteProtection(None, rng)
        self._output = bytearray()
        self._events: list[Event] = []
        self._hs_buffer = bytearray()
        self._message_start = 0
        self._pending_read: DirectionKeys | None = None
        self._pending_write: DirectionKeys | None = None
        self._close_sent = False
        self._close_received = False
        self._handshake_done = False
        self._delegate: SessionDelegate | None = None
        """Seam 5 (:mod:`tls12.delegate`): who holds the session secrets; ``None``: this object."""
        self._key_handle: KeyHandle | None = None
        self._opened_ahead: tuple[bytes, bytes] | None = None
        """Delegated: ``(fragment, plaintext)`` of the first record of the next read epoch,
        opened already by the delegate with the keys (:class:`tls12.delegate.FlightDelegate`)."""

    # negotiated parameters, stored in the handshake context
    version = ContextAttribute()
    cipher_suite = ContextAttribute()
    client_random = ContextAttribute()
    server_random = ContextAttribute()
    session_id = ContextAttribute()
    master_secret = ContextAttribute()
    extended_master_secret = ContextAttribute()
    secure_renegotiation = ContextAttribute()
    server_name = ContextAttribute()
    resumed = ContextAttribute()
    session = ContextAttribute()

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

    def receive_data(self, data: bytes, *, max_records: int | None = None) -> list[Event]:
        """Feed bytes from the peer; ``b""`` means the transport reached end of file.

        ``max_records`` limits how many whole records this call processes
        (``None``: all of them); the rest stay buffered for
        :meth:`receive_record`.  ``max_records=0`` only buffers.
        """
        if self.state is HandshakeState.CLOSED:
            return []
        if not data:
            self.state = HandshakeState.CLOSED
            return [ConnectionClosed(clean=False)]
        if max_records is not None and max_records < 0:
            raise ValueError("max_records must be at least 0")
        self._reader.feed(data)
        return self._process_records(max_records)[0]

    def receive_record(self) -> ReceivedRecord | None:
        """Process the next whole record already buffered; ``None`` if there is none.

        Per-record progress for a mirror (SSLACC §5.5): after each record the
        returned :class:`ReceivedRecord` says how many wire bytes it took and
        the read sequence number that now summarises the read direction, so a
        checkpoint can be taken at exactly that record boundary.  Buffer the
        bytes with ``receive_data(data, max_records=0)`` first.
        """
        if self.state is HandshakeState.CLOSED:
            return None
        before = self._reader.buffered
        events, count = self._process_records(1)
        if not count:
            return None
        return ReceivedRecord(before - self._reader.buffered, self._reader.seq, events)

    def _process_records(self, limit: int | None) -> tuple[list[Event], int]:
        """Handle up to ``limit`` buffered whole records: (their events, how many were handled)."""
        count = 0
        try:
            while self.state is not HandshakeState.CLOSED and (limit is None or count < limit):
                record = self._reader.next_record()
                if record is None:
                    break
                count += 1
                self._handle_record(*record)
        except RemoteProtocolError as exc:
            self._fatal(exc.description)
            # events decoded before the error (authenticated data) stay available on the exception
            exc.events = self._events
            self._events = []
            raise
        events, self._events = self._events, []
        return events, count

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

    def data_to_send_records(self) -> list[bytes]:
        """What :meth:`data_to_send` would return, cut into whole records (header included).

        For a mirror that must know which records the peer has acknowledged
        (SSLACC §5.6): the *i*-th element's length is the wire size of one
        record, so an acknowledged byte count maps to "records 0..k-1 whole,
        record k up to byte j".  Sequence numbers count back from the end: the
        last record has ``write_protection.seq - 1``, the one before it one
        less, back to the ChangeCipherSpec that started the current epoch.
        :class:`LocalProtocolError` (and nothing is taken) if the record
        writer emits something other than TLS records (the SSL-splitting
        writer emits stubs).
        """
        out = bytes(self._output)
        records = []
        pos = 0
        while pos < len(out):
            if len(out) - pos < 5 or out[pos] not in _RECORD_TYPES:
                raise LocalProtocolError("the record writer's output is not whole TLS records")
            end = pos + 5 + int.from_bytes(out[pos + 3 : pos + 5], "big")
            if end > len(out):
                raise LocalProtocolError("the record writer's output is not whole TLS records")
            records.append(out[pos:end])
            pos = end
        self._output.clear()
        return records

    # --- records ----------------------------------------------------------

    def _write_records(self, content_type: int, fragments: list[bytes]) -> None:
        version = self.context.version
        records = [OutgoingRecord(content_type, version, self._write.next_seq(), f) for f in fragments]
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
        """Route one record: handshake bytes to reassembly, any other record through the table."""
        if content_type == _APPLICATION_DATA_RECORD:  # the common case first
            received = _APPLICATION_DATA
        elif content_type == _HANDSHAKE_RECORD:
            if not fragment:
                raise UnexpectedMessage("empty handshake record")
            self._hs_buffer += fragment
            self._drain_handshake()
            return
        elif content_type == _ALERT_RECORD:
            received = RecordInput.ALERT
        else:  # ChangeCipherSpec: the reader passes only the four known content types
            # §7.1: the record must hold exactly the single byte 1.  Anything else is not
            # the message §7.1 defines but an inappropriate one: unexpected_message, what
            # OpenSSL 3 and GnuTLS send (BoringSSL: illegal_parameter); not decode_error,
            # since no length field inside a message is wrong.
            if fragment != b"\x01":
                raise UnexpectedMessage(f"ChangeCipherSpec record of {len(fragment)} bytes is not the single byte 1")
            received = RecordInput.CHANGE_CIPHER_SPEC
        if self._hs_buffer:
            raise UnexpectedMessage(f"{received.value} interleaved with a handshake message")
        state = self.state
        transition = self.TRANSITIONS.lookup(state, received)
        if transition is None:
            raise UnexpectedMessage(f"{received.value} in state {state.value}")
        chosen = getattr(self, transition.handler)(fragment)
        self.state = transition.single if chosen is None and transition.single else transition.resolve(chosen, state)

    def _handle_application_data(self, fragment: bytes) -> None:
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
            if self.TRANSITIONS.lookup(self.state, self._hs_buffer[0]) is None:
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

    def _unexpected_handshake(self, msg_type: int) -> UnexpectedMessage:
        name = HandshakeType(msg_type).name if msg_type in HandshakeType._value2member_map_ else msg_type
        return UnexpectedMessage(f"handshake message {name} in state {self.state.value}")

    def _handle_handshake_message(self, msg_type: int, raw: bytes) -> None:
        """Dispatch one whole message by the table: parse, hash, run the handler, change state."""
        transition = self.TRANSITIONS.lookup(self.state, msg_type)
        if transition is None:
            raise self._unexpected_handshake(msg_type)
        message = transition.parse(Buffer(raw[4:]))
        transcript = self.context.transcript
        self._message_start = len(transcript)
        if transition.hashed:
            transcript += raw
        chosen = getattr(self, transition.handler)(message)
        if self.state is not HandshakeState.CLOSED:
            state = self.state
            self.state = transition.single if chosen is None and transition.single else transition.resolve(chosen, state)

    def _transcript_before_message(self) -> bytes:
        """The transcript without the message being handled (what Finished and signatures cover)."""
        return bytes(self.context.transcript[: self._message_start])

    def _handle_hello_request(self, _: None) -> None:
        """Client: HelloRequest is ignored during a handshake, refused once established (§7.4.1.1)."""
        if self.state is HandshakeState.ESTABLISHED:
            self._send_alert(AlertLevel.WARNING, AlertDescription.NO_RENEGOTIATION)

    def _refuse_renegotiation(self, _: bytes) -> None:
        """Server: a ClientHello on an established connection gets a no_renegotiation warning."""
        self._send_alert(AlertLevel.WARNING, AlertDescription.NO_RENEGOTIATION)

    def _send_handshake(self, *messages: tuple[int, bytes]) -> None:
        """Frame, hash and send a flight, coalescing messages into as few records as possible."""
        flight = b""
        for msg_type, body in messages:
            framed = frame_handshake(msg_type, body)
            self.context.transcript += framed
            flight += framed
        chunks = [flight[i : i + MAX_PLAINTEXT] for i in range(0, len(flight), MAX_PLAINTEXT)]
        self._write_records(ContentType.HANDSHAKE, chunks)

    def _handle_change_cipher_spec(self, fragment: bytes) -> None:
        """Switch the read side to the pending keys (RFC 5246 §7.1); the byte was checked."""
        pending = self._pending_read
        if pending is None:
            raise UnexpectedMessage("ChangeCipherSpec before keys were agreed")
        if self._delegate is None:
            self._reader.set_keys(pending)
        else:
            from .delegate import DelegatedReadCipher

            opened, self._opened_ahead = self._opened_ahead, None
            self._reader.set_cipher(DelegatedReadCipher(pending, self._reader, opened))  # type: ignore[arg-type]
        self._pending_read = None

    def _send_change_cipher_spec(self) -> None:
        self._write_records(ContentType.CHANGE_CIPHER_SPEC, [b"\x01"])
        if self._delegate is None:
            self._write = WriteProtection(self._pending_write, self._rng)
        else:
            from .delegate import DelegatedWriteProtection

            self._write = DelegatedWriteProtection(self._pending_write, self._rng)  # type: ignore[arg-type]
        self._pending_write = None

    def _handle_alert(self, fragment: bytes) -> Enum:
        """A close_notify or fatal alert closes the connection; a warning is reported and kept."""
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
            self._events.append(ConnectionClosed(clean=True, description=desc))
            return HandshakeState.CLOSED
        try:
            lvl = AlertLevel(level)
        except ValueError:
            raise DecodeError(f"unknown alert level {level}") from None
        self._events.append(AlertReceived(lvl, desc))
        if lvl is AlertLevel.FATAL:
            self._close_sent = True  # no alert in answer to a fatal alert
            self._events.append(ConnectionClosed(clean=False, description=desc))
            return HandshakeState.CLOSED
        return SAME

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
        # k' of each direction (tls12.record: explicit CBC IVs), from the master secret under
        # a label of our own, so nothing in the key block -- exposed in part by sslsplit -- gives it
        client_iv_key = server_iv_key = b""
        if params.block_size:
            seed = self.server_random + self.client_random
            iv_keys = prf.prf(self.master_secret, IV_KEY_LABEL, seed, 32)
            client_iv_key, server_iv_key = iv_keys[:16], iv_keys[16:]
        client = DirectionKeys(
            params, block.client_key, block.client_mac_key, block.client_iv, client_iv_key
        )
        server = DirectionKeys(
            params, block.server_key, block.server_mac_key, block.server_iv, server_iv_key
        )
        self._pending_write, self._pending_read = (client, server) if self.is_client else (server, client)

    def _set_premaster(self, premaster: bytes) -> None:
        """Master secret from the premaster (RFC 7627 when negotiated), then the pending keys.

        Call it once the ClientKeyExchange (or a variant's key-transport message)
        is in the transcript: the extended master secret hashes the transcript up
        to and including that message.
        """
        if self.extended_master_secret:
            self.master_secret = prf.extended_master_secret(premaster, prf.transcript_hash(bytes(self.context.transcript)))
        else:
            self.master_secret = prf.master_secret(premaster, self.client_random, self.server_random)
        self._derive_keys()

    def _set_delegated_keys(self, handle: KeyHandle) -> None:
        """Pending keys of a delegated connection: the delegate's handle, one view per direction."""
        from .delegate import DelegatedDirection

        assert self._delegate is not None
        self._key_handle = handle
        client = DelegatedDirection(self._delegate, handle, True)
        server = DelegatedDirection(self._delegate, handle, False)
        pending = (client, server) if self.is_client else (server, client)
        self._pending_write, self._pending_read = pending  # type: ignore[assignment]

    def _finished_body(self, from_client: bool) -> bytes:
        if self._delegate is not None:
            assert self._key_handle is not None
            transcript_hash = prf.transcript_hash(bytes(self.context.transcript))
            return self._delegate.verify_data(self._key_handle, from_client, transcript_hash)
        return prf.verify_data(self.master_secret, from_client, prf.transcript_hash(bytes(self.context.transcript)))

    def _check_finished(self, finished: Finished) -> None:
        """Verify the peer's Finished against the transcript before it (the base hashed it already)."""
        if self._delegate is not None:
            assert self._key_handle is not None
            transcript_hash = prf.transcript_hash(self._transcript_before_message())
            if not self._delegate.check_finished(
                self._key_handle, not self.is_client, transcript_hash, finished.verify_data
            ):
                raise DecryptError("Finished verify_data mismatch")
            return
        expected = prf.verify_data(
            self.master_secret, not self.is_client, prf.transcript_hash(self._transcript_before_message())
        )
        if not hmac.compare_digest(finished.verify_data, expected):
            raise DecryptError("Finished verify_data mismatch")

    def _complete(self) -> None:
        """Report the finished handshake; the Finished handler's transition enters ESTABLISHED."""
        self._handshake_done = True
        self._reader.version = self.context.version
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
        """Serialise the whole connection so another process can continue it (contains keys!).

        :class:`tls12.delegate.DelegatedStateError` for a delegated connection: its keys are in
        the delegate, and a document of handles alone could not be continued elsewhere.
        """
        from .state import export_connection

        self._refuse_delegated_export()
        return export_connection(self)

    def export_keys(self) -> bytes:
        """The compact base of an established connection: keys and parameters, no transcript.

        Taken once after the handshake; from then on :meth:`export_progress`
        is all a mirror needs (see :func:`tls12.state.export_keys`).
        :class:`tls12.delegate.DelegatedStateError` for a delegated connection.
        """
        from .state import export_keys

        self._refuse_delegated_export()
        return export_keys(self)

    def _refuse_delegated_export(self) -> None:
        if self._delegate is not None:
            from .delegate import DelegatedStateError

            raise DelegatedStateError(
                "a delegated connection's keys are held by its delegate; its state cannot be exported"
            )

    def export_progress(self) -> Progress:
        """Sequence numbers and close flags now: the delta on top of :meth:`export_keys`."""
        from .state import Progress

        return Progress(
            self._reader.seq,
            self._write.seq,
            self._close_sent,
            self._close_received,
            self.state is HandshakeState.CLOSED,
        )

    def import_progress(self, progress: Progress | bytes) -> None:
        """Move an imported connection to ``progress`` (a :class:`tls12.state.Progress`).

        The sequence numbers are set as given, backwards included: a mirror
        rewinds the write side to the first record the peer has not
        acknowledged and re-seals it (byte-identically, :mod:`tls12.record`).
        """
        from .state import Progress

        if isinstance(progress, bytes):
            progress = Progress.from_bytes(progress)
        if not self._handshake_done:
            raise LocalProtocolError("progress applies to a connection past its handshake")
        self._reader.seq = progress.read_seq
        self._write.seq = progress.write_seq
        self._close_sent = progress.close_sent
        self._close_received = progress.close_received
        if progress.closed:
            self.state = HandshakeState.CLOSED

    def export_machinery(self) -> dict[str, Any]:
        """The record layer and buffers as JSON-ready values (for :mod:`tls12.state`).

        Everything that is not handshake context: the read and write epochs
        with their sequence numbers, the pending keys between key derivation
        and ChangeCipherSpec, bytes received but not yet a whole record or
        message, bytes queued for sending, and the close flags.
        :class:`tls12.delegate.DelegatedStateError` for a delegated connection.
        """
        self._refuse_delegated_export()
        return {
            "reader": {
                "keys": keys_to_json(self._reader.keys),
                "seq": self._reader.seq,
                "version": self._reader.version,
                "pending": self._reader.pending.hex(),
            },
            "writer": {"keys": keys_to_json(self._write.keys), "seq": self._write.seq},
            "pending_read": keys_to_json(self._pending_read),
            "pending_write": keys_to_json(self._pending_write),
            "hs_buffer": bytes(self._hs_buffer).hex(),
            "output": bytes(self._output).hex(),
            "close_sent": self._close_sent,
            "close_received": self._close_received,
            "handshake_done": self._handshake_done,
        }

    def import_machinery(self, doc: dict[str, Any]) -> None:
        """Inverse of :meth:`export_machinery`, into a freshly constructed connection."""
        reader = doc["reader"]
        self._reader = RecordReader()
        self._reader.set_keys(keys_from_json(reader["keys"]), reader["seq"])
        self._reader.version = reader["version"]
        self._reader.feed(bytes.fromhex(reader["pending"]))
        self._write = WriteProtection(keys_from_json(doc["writer"]["keys"]), self._rng, doc["writer"]["seq"])
        self._pending_read = keys_from_json(doc["pending_read"])
        self._pending_write = keys_from_json(doc["pending_write"])
        self._hs_buffer = bytearray.fromhex(doc["hs_buffer"])
        self._output = bytearray.fromhex(doc["output"])
        self._close_sent = bool(doc["close_sent"])
        self._close_received = bool(doc["close_received"])
        self._handshake_done = bool(doc["handshake_done"])

