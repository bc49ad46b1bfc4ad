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

The connection says what it did, so nobody re-parses its bytes: a record read
with :meth:`Connection.receive_record` comes back as a :class:`ReceivedRecord`
(content type, the handshake messages it completed, whether it was protected,
its wire length), and :meth:`Connection.enable_trace` (or ``trace=True`` in the
config) records a qlog-like :class:`tls12.trace.TraceEvent` for every record
read or written, message parsed or sent, state transition and alert.  The
state-export methods live in :class:`tls12.state.StateSeam` and the key
schedule in :class:`tls12.keyschedule.KeySchedule`; both are inherited here.

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
   handles, never the premaster, master secret or record keys (WebALPS); asked
   inline or, never calling out of ``receive_data``, by event
   (:mod:`tls12.delegation`: ``DelegateNeeded``, :meth:`Connection.supply`).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from .buffer import Buffer
from .context import ContextAttribute, HandshakeContext
from .delegation import PENDING, Delegation
from .errors import (
    AlertDescription,
    AlertLevel,
    DecodeError,
    LocalProtocolError,
    RemoteProtocolError,
    UnexpectedMessage,
)
from .events import AlertReceived, ApplicationData, ConnectionClosed, Event, HandshakeComplete
from .handshake_table import (
    ANY_STATE,
    SAME,
    HandshakeState,
    RecordInput,
    Transition,
    TransitionTable,
)
from .keyjson import keys_from_json, keys_to_json
from .keyschedule import KeySchedule
from .messages import HandshakeType, frame_handshake, pull_handshake_header
from .record import (
    MAX_PLAINTEXT,
    ContentType,
    DirectionKeys,
    OutgoingRecord,
    RecordReader,
    RecordWriter,
    WriteProtection,
    split_records,
)
from .state import StateSeam
from .suites import SUITES, SuiteParams
from .trace import ReceivedRecord, TraceEvent, handshake_type

if TYPE_CHECKING:
    from .delegate import EventDelegate, KeyHandle, SessionDelegate


__all__ = [
    "Connection",
    "HandshakeState",
    "COMMON_TRANSITIONS",
    "ReceivedRecord",
    "keys_to_json",
    "keys_from_json",
]


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


class Connection(KeySchedule, StateSeam, Delegation):
    """Shared machinery: records, handshake reassembly, transcript, alerts, application data."""

    is_client: bool = False
    CONTEXT: type[HandshakeContext] = HandshakeContext
    """The handshake-context dataclass of this role; a protocol variant names its subclass here."""
    TRANSITIONS: TransitionTable = COMMON_TRANSITIONS
    """(state, input) -> :class:`tls12.handshake_table.Transition`; extended by subclasses.

    States are :class:`HandshakeState` members; a protocol variant may add its
    own states as members of another ``Enum`` and list them here (Reverse SSL
    does), since the machinery only compares and looks them up."""

    def __init__(self, rng: Callable[[int], bytes], record_writer: RecordWriter | None = None,
                 *, random_ivs: bool = False) -> None:
        self._rng = rng
        self._random_ivs = random_ivs  # the config's random_ivs: see WriteProtection
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
        self._delegate: SessionDelegate | EventDelegate | None = None
        """Seam 5 (:mod:`tls12.delegate`): who holds the session secrets; ``None``: this object."""
        self._key_handle: KeyHandle | None = None
        self._opened_ahead: tuple[bytes, bytes] | None = None
        """Delegated: ``(fragment, plaintext)`` of the first record of the next read epoch,
        opened already by the delegate with the keys (:class:`tls12.delegate.FlightDelegate`)."""
        self._parsed_types: list[int] = []
        """Handshake message types parsed since the current ``_process_records`` began."""
        self.trace: list[TraceEvent] | None = None
        """What the connection did (:mod:`tls12.trace`), once :meth:`enable_trace` was called."""
        self._init_delegation()

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
    def closed(self) -> bool:
        return self.state is HandshakeState.CLOSED

    @property
    def suite_params(self) -> SuiteParams | None:
        return SUITES.get(self.cipher_suite) if self.cipher_suite is not None else None

    @property
    def write_protection(self) -> WriteProtection:
        """The current write epoch: keys (encryption key and IV only through it), MAC computation."""
        return self._write

    def enable_trace(self) -> None:
        """Record a :class:`tls12.trace.TraceEvent` for everything done from now on (idempotent)."""
        if self.trace is None:
            self.trace = []

    def take_trace(self) -> list[TraceEvent]:
        """The trace events recorded since the last call (and forget them); ``[]`` if off."""
        if not self.trace:
            return []
        events, self.trace = self.trace, []
        return events

    def _emit(self, category: str, name: str, **data: Any) -> None:
        """Append a trace event; callers on hot paths check ``self.trace`` first."""
        if self.trace is not None:
            self.trace.append(TraceEvent(category, name, data))

    def _enter(self, state: Enum, received: object) -> None:
        """Enter ``state`` after ``received`` (traced as a transition)."""
        if self.trace is not None:
            self._emit("state", "transition", **{"from": self.state, "to": state, "input": received})
        self.state = state

    def receive_data(self, data: bytes, *, max_records: int | None = None) -> list[Event]:
        """Feed bytes from the peer; ``b""`` means the transport reached end of file.

        ``max_records`` limits how many whole records this call processes
        (``None``: all of them); the rest stay buffered for
        :meth:`receive_record`.  ``max_records=0`` only buffers.
        """
        if self.state is HandshakeState.CLOSED:
            return []
        if not data:
            self._enter(HandshakeState.CLOSED, "eof")
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
        before, encrypted = self._reader.buffered, self._reader.encrypted
        events, count, content_type = self._process_records(1)
        if not count:
            return None
        types = tuple(handshake_type(t) for t in self._parsed_types)
        return ReceivedRecord(before - self._reader.buffered, self._reader.seq, events,
                              ContentType(content_type), types, encrypted)

    def _process_records(self, limit: int | None) -> tuple[list[Event], int, int]:
        """Handle up to ``limit`` buffered whole records: (their events, how many were handled,
        the content type of the last one)."""
        count = content_type = 0
        self._parsed_types.clear()
        next_record = self._reader.next_record if self.trace is None else self._next_record_traced
        try:
            if self._hs_buffer and self._blocking is None and self.state is not HandshakeState.CLOSED:
                self._drain_handshake()  # messages behind one that waited for the delegate
            while (self.state is not HandshakeState.CLOSED and self._blocking is None
                   and (limit is None or count < limit)):
                if self._delegate is not None and self._ask_open():
                    break  # the delegate opens the next record first (tls12.delegation)
                record = next_record()
                if record is None:
                    break
                count += 1
                content_type = record[0]
                self._handle_record(*record)
        except RemoteProtocolError as exc:
            self._fatal(exc.description)
            # events decoded before the error (authenticated data) stay available on the exception
            exc.events = self._events
            self._events = []
            raise
        events, self._events = self._events, []
        return self._delegate_events(events), count, content_type

    def _next_record_traced(self) -> tuple[int, bytes] | None:
        """:meth:`RecordReader.next_record`, with its ``record/received`` trace event."""
        before, encrypted = self._reader.buffered, self._reader.encrypted
        record = self._reader.next_record()
        if record is not None:
            length = before - self._reader.buffered - 5
            self._emit("record", "received", content_type=ContentType(record[0]),
                       length=length, encrypted=encrypted)
        return record

    def send_data(self, data: bytes) -> None:
        """Queue application data, fragmented into records of at most 2^14 bytes."""
        if self.state is not HandshakeState.ESTABLISHED or self._close_sent:
            raise LocalProtocolError(f"cannot send application data in state {self.state.value}")
        if (len(data) <= MAX_PLAINTEXT and not self._seal_later and self.trace is None
                and type(self.record_writer) is RecordWriter):
            # the common case, one record through the default writer: what _write_records and
            # RecordWriter.write_records do for it, without their lists
            write = self._write
            self._output += write.seal(
                OutgoingRecord(_APPLICATION_DATA_RECORD, self.context.version, write.next_seq(), bytes(data)))
            return
        chunks = [bytes(data[i : i + MAX_PLAINTEXT]) for i in range(0, len(data), MAX_PLAINTEXT)]
        self._write_records(ContentType.APPLICATION_DATA, chunks or [b""])

    def close(self) -> None:
        """Queue a close_notify alert (RFC 5246 §7.2.1); idempotent."""
        if not self._close_sent:
            self._send_alert(AlertLevel.WARNING, AlertDescription.CLOSE_NOTIFY)
            self._close_sent = True
        if self._close_received:
            self._enter(HandshakeState.CLOSED, "close")

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
        ends = split_records(out)
        if ends is None:
            raise LocalProtocolError("the record writer's output is not whole TLS records")
        self._output.clear()
        return [out[start:end] for start, end in pairwise([0, *ends])]

    # --- records ----------------------------------------------------------

    def _write_records(self, content_type: int, fragments: list[bytes]) -> None:
        if self._seal_later:  # event mode: the delegate seals them later (tls12.delegation)
            self._hold_for_seal(content_type, fragments)
            if self.trace is not None:
                self._trace_sent(content_type, fragments, b"", True)
            return
        version = self.context.version
        write = self._write
        if len(fragments) == 1 and type(self.record_writer) is RecordWriter:
            # one record through the default writer: what RecordWriter.write_records does for it
            wire = write.seal(OutgoingRecord(content_type, version, write.next_seq(), fragments[0]))
        else:
            records = [OutgoingRecord(content_type, version, write.next_seq(), f) for f in fragments]
            wire = self.record_writer.write_records(records, write)
        self._output += wire
        if self.trace is not None:
            self._trace_sent(content_type, fragments, wire, self._write.encrypted)

    def _trace_sent(self, content_type: int, fragments: list[bytes], wire: bytes, encrypted: bool) -> None:
        """``record/sent`` events; wire lengths only if the writer emitted one record per fragment."""
        ends = split_records(wire)
        lengths = (
            [end - start - 5 for start, end in pairwise([0, *ends])]
            if ends is not None and len(ends) == len(fragments)
            else [None] * len(fragments)
        )
        for fragment, length in zip(fragments, lengths, strict=True):
            self._emit("record", "sent", content_type=ContentType(content_type), length=length,
                       plaintext_length=len(fragment), encrypted=encrypted)

    def _send_alert(self, level: AlertLevel, description: AlertDescription) -> None:
        self._emit("alert", "sent", level=level, description=description)
        self._write_records(ContentType.ALERT, [bytes((level, description))])

    def _fatal(self, description: AlertDescription) -> None:
        """Queue a fatal alert and close.  Before our keys are in use, plaintext handshake
        bytes not yet taken are dropped: the peer gets the alert alone, first (a flight it
        could answer would only mislead it; nothing is numbered in the clear)."""
        if not self._write.encrypted:
            self._output.clear()
        if self.state is not HandshakeState.CLOSED and not self._close_sent:
            try:
                self._send_alert(AlertLevel.FATAL, description)
            except Exception:  # noqa: BLE001 - the alert is best effort; we are closing anyway
                pass
            self._close_sent = True
        self._enter(HandshakeState.CLOSED, "error")

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
        new = transition.single if chosen is None and transition.single else transition.resolve(chosen, state)
        if self.trace is None:
            self.state = new
        else:
            self._enter(new, received)

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
        while self.state is not HandshakeState.CLOSED and self._hs_buffer and self._blocking is None:
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
        self._parsed_types.append(msg_type)
        if self.trace is not None:
            self._emit("handshake", "message_parsed", type=handshake_type(msg_type), length=len(raw) - 4)
        transcript = self.context.transcript
        self._message_start = len(transcript)
        if transition.hashed:
            transcript += raw
        chosen = getattr(self, transition.handler)(message)
        if chosen is PENDING:  # the handler asked the delegate by event: its transition waits
            self._after_message = (transition, msg_type)
            return
        self._finish_message(transition, msg_type, chosen)

    def _finish_message(self, transition: Transition, msg_type: int, chosen: object) -> None:
        """Enter the state the handler of a handshake message chose (checked by the table)."""
        if self.state is not HandshakeState.CLOSED:
            state = self.state
            new = transition.single if chosen is None and transition.single else transition.resolve(chosen, state)  # type: ignore[arg-type]  # handlers return the table's NextState; typed object here
            if self.trace is None:
                self.state = new
            else:
                self._enter(new, handshake_type(msg_type))

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
        if self.trace is not None:
            for msg_type, body in messages:
                self._emit("handshake", "message_sent", type=handshake_type(msg_type), length=len(body))
        flight = b"".join([frame_handshake(msg_type, body) for msg_type, body in messages])
        self.context.transcript += flight
        chunks = ([flight] if 0 < len(flight) <= MAX_PLAINTEXT else
                  [flight[i : i + MAX_PLAINTEXT] for i in range(0, len(flight), MAX_PLAINTEXT)])
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
            self._reader.set_cipher(DelegatedReadCipher(pending, opened))  # type: ignore[arg-type]  # delegated mode: the pending keys are a DelegatedDirection
        self._pending_read = None

    def _send_change_cipher_spec(self) -> None:
        self._write_records(ContentType.CHANGE_CIPHER_SPEC, [b"\x01"])
        if self._delegate is None:
            self._write = WriteProtection(self._pending_write, self._rng, random_ivs=self._random_ivs)
        else:
            from .delegate import DelegatedWriteProtection

            self._write = DelegatedWriteProtection(self._pending_write, self._rng)  # type: ignore[arg-type]  # delegated mode: the pending keys are a DelegatedDirection
            self._seal_later = self.asks_by_event
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
        self._emit("alert", "received", level=AlertLevel(level) if level in (1, 2) else level,
                   description=desc)
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
