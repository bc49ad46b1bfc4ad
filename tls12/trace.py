"""What a connection did, as a structured event log (qlog-like), and the same view of bare bytes.

The core says what it did: a connection whose trace is on
(:meth:`tls12.connection.Connection.enable_trace`) appends one :class:`TraceEvent` for every
record it reads or writes, every handshake message it parses or sends, every state change
and every alert, in the order it happened.  The vocabulary follows aioquic's
``quic/logger.py`` (itself qlog's): a *category*, an event *name* and a dict of *data*:

==========  ==================  ==============================================================
category    name                data
==========  ==================  ==============================================================
record      received            ``content_type`` (:class:`~tls12.record.ContentType`),
                                ``length`` (fragment bytes on the wire, header excluded),
                                ``encrypted`` (opened with keys: after ChangeCipherSpec)
record      sent                ``content_type``, ``length`` (on the wire; ``None`` when the
                                record writer emits something other than records),
                                ``plaintext_length``, ``encrypted``
handshake   message_parsed      ``type`` (:class:`~tls12.messages.HandshakeType`, or the int of
                                a variant's own type), ``length`` (body bytes)
handshake   message_sent        ``type``, ``length``
state       transition          ``from``, ``to`` (state enum members), ``input`` (the
                                message type or :class:`~tls12.handshake_table.RecordInput`;
                                ``"eof"`` or ``"error"`` for a close without input)
alert       received / sent     ``level``, ``description`` (enum members where known)
==========  ==================  ==============================================================

No event carries a time: the core has no clock.  A caller that wants one stamps the events
it takes (:meth:`~tls12.connection.Connection.take_trace`) with its own ``now`` -- the
asyncio adapter's ``loop.time()``, a SimPy driver's ``env.now``.  With the trace off (the
default) the connection builds no event at all.

Who reads it: teaching notebooks (the handshake as a list), the SimPy driver's CPU
accounting (:class:`netsim.cpu.Tls12Cpu` charges per record and per message type), and
models that must know what a record was without re-parsing it.

:class:`WireTrace` is the same vocabulary for a party that holds *no* connection: a
middlebox forwarding ciphertext, or a model replaying recorded bytes.  It reads one
direction of a record stream without keys and reports ``record/received`` (``encrypted``:
after that direction's ChangeCipherSpec) and, for handshake records in clear,
``handshake/message_parsed``; a handshake record after ChangeCipherSpec (the encrypted
Finished) is reported as one message of unknown ``type`` (``None``).  It is the one place
outside the connection that reads record headers, so no model or relay does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .events import Event
from .messages import HandshakeType
from .record import ContentType, split_records

__all__ = ["TraceEvent", "WireTrace", "ReceivedRecord", "handshake_type"]


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One thing a connection did: ``category`` / ``name`` and what it concerned (``data``)."""

    category: str
    name: str
    data: dict[str, Any]


def handshake_type(value: int) -> HandshakeType | int:
    """``value`` as a :class:`HandshakeType` member when it is one (variants add their own)."""
    try:
        return HandshakeType(value)
    except ValueError:
        return value


def content_type(value: int) -> ContentType | int:
    """``value`` as a :class:`ContentType` member when it is one."""
    try:
        return ContentType(value)
    except ValueError:
        return value


class WireTrace:
    """Trace events of one direction of a TLS record stream, read without keys.

    ``feed(data)`` takes the next bytes of the stream and returns the events of the records
    (and clear handshake messages) they completed; bytes of an unfinished record wait.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._handshake = bytearray()
        self.encrypted = False
        """Whether this direction's ChangeCipherSpec went by (later records are protected)."""

    def feed(self, data: bytes) -> list[TraceEvent]:
        self._buffer += data
        boundaries = split_records(self._buffer, partial=True)
        events: list[TraceEvent] = []
        pos = 0
        for end in boundaries:
            ctype = content_type(self._buffer[pos])
            fragment = bytes(self._buffer[pos + 5 : end])
            pos = end
            events.append(TraceEvent("record", "received", {
                "content_type": ctype, "length": len(fragment), "encrypted": self.encrypted}))
            if ctype == ContentType.HANDSHAKE:
                events += self._messages(fragment)
            elif ctype == ContentType.CHANGE_CIPHER_SPEC:
                self.encrypted = True
        del self._buffer[:pos]
        return events

    def _messages(self, fragment: bytes) -> list[TraceEvent]:
        """The handshake messages ``fragment`` completes (one of unknown type if encrypted)."""
        if self.encrypted:
            return [TraceEvent("handshake", "message_parsed", {"type": None, "length": None})]
        hs = self._handshake
        hs += fragment
        events = []
        while len(hs) >= 4:
            size = int.from_bytes(hs[1:4], "big")
            if len(hs) < 4 + size:
                break
            events.append(TraceEvent("handshake", "message_parsed",
                                     {"type": handshake_type(hs[0]), "length": size}))
            del hs[: 4 + size]
        return events


@dataclass(frozen=True, slots=True)
class ReceivedRecord:
    """One record handled by :meth:`Connection.receive_record`: what it was and what it meant.

    A caller that must know what the client sent (a mirror labelling its checkpoints, a
    model charging CPU) reads it here instead of re-parsing the record's bytes.
    """

    wire_length: int
    """Bytes the record took on the wire, 5-byte header included (the record boundary)."""
    read_seq: int
    """The read sequence number after it (what a checkpoint at this boundary exports)."""
    events: list[Event]
    """What the record meant (often nothing: a part of a handshake message)."""
    content_type: ContentType
    """The record's content type."""
    handshake_types: tuple[HandshakeType | int, ...] = ()
    """The handshake messages this record completed, in order (a message split over
    several records belongs to the record that completes it); a variant's own message
    types are plain ints unless they are members of its own ``IntEnum``."""
    encrypted: bool = False
    """Whether the record was protected (read after the peer's ChangeCipherSpec)."""
