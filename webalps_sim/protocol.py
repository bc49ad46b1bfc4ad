"""The host<->guardian protocol: the messages, one frame each, and which request gets which reply.

The host (untrusted) and the guardian (the coprocessor's role) talk over a local stream socket
in frames of :mod:`webalps_sim.codec` (length, type, request id, payload).  This module is
sans-IO: each message is a frozen dataclass whose ``LAYOUT`` lists its fields **in wire order**
with the :class:`webalps_sim.codec.Field` that writes each one; :func:`push_message` and
:func:`pull_message` walk that one declaration, so a message is encoded and decoded by the same
table (``to_payload`` / ``from_payload`` are the same two calls as methods).  The messages of
every served request -- ``OPEN``, ``SEAL``, ``OPENED``, ``SEALED``, ``RELEASE`` -- also have
hand-written codecs (:mod:`webalps_sim._wire`, one ``struct`` call per record), which
``to_payload`` and :func:`decode_message` use first; the table stays the reference (a
randomized test holds the two to the same bytes, and anything the fast decoder does not take
is judged by the table).  Anything malformed
-- an unknown type, a length above :data:`MAX_FRAME`, a truncated field, trailing bytes after
the last field -- is one typed :class:`ProtocolError`, never a crash: the guardian answers it
with an :class:`Error` frame and closes that host connection only.

Records travel as named tuples whose field order is their wire order: :class:`SealRecord`
``(content_type, version, seq, plaintext)`` as :class:`tls12.record.OutgoingRecord` has them,
:class:`OpenRecord` ``(seq, content_type, version, fragment)`` as
:meth:`tls12.delegate.SessionDelegate.open` takes them.  (The two orders differ on the wire
since the first version of the protocol; the frames are pinned byte for byte by
``tests/webalps_sim/test_protocol_golden.py``.)

Requests (host -> guardian) and their replies:

================== ================================ ===========================================
request            does                             reply
================== ================================ ===========================================
``HELLO``          identify the guardian            ``INFO`` (chain, measurement, app, run id)
``EPHEMERAL``      ECDHE: a fresh ephemeral key     ``EPHEMERAL_KEY`` (its handle, the public
                   and the ServerKeyExchange        point and the signature over the randoms
                   signature                        and ServerECDHParams)
``DERIVE``         RSA-decrypt the premaster (or    ``HANDLE``
                   ECDHE with the client's point),
                   keys
``RESUME``         keys of an abbreviated handshake ``HANDLE``
``VERIFY_DATA``    the server's Finished            ``DATA``
``CHECK_FINISHED`` check the client's Finished      ``BOOL``
``SEAL``           protect a batch of records       ``SEALED``
``OPEN``           open a batch of records          ``OPENED`` (+ records the guardian sealed)
``RELEASE``        forget a handle                  ``OK``
``FINISH``         check the client's Finished and  ``FINISHED`` (the server's verify_data and
                   make the server's, one exchange  its Finished record, already sealed)
``DERIVE_FINISH``  the client's whole flight:       ``DERIVED`` (handle, the client's Finished
                   ``DERIVE`` + open and check the  message, the server's verify_data and its
                   client's Finished + ``FINISH``   Finished record, already sealed)
================== ================================ ===========================================

A full handshake costs one exchange (``DERIVE_FINISH``) when the client's flight reaches the
host whole, else three (``DERIVE``, ``OPEN``, ``FINISH``); a request costs ``OPEN`` + ``SEAL``.
Which request a channel accepts in which state is :mod:`webalps_sim.state`'s table.

**ECDHE_RSA.**  For an ECDHE suite the host asks ``EPHEMERAL`` once it has chosen the suite, the
group and the signature scheme (before it sends the ServerHello flight): the guardian makes the
ephemeral key, keeps its private half under a handle and returns the public point and the
ServerKeyExchange signature.  ``DERIVE`` / ``DERIVE_FINISH`` then name that handle in
``ephemeral_id`` and carry the client's public point where RSA carries the encrypted premaster
(``client_version`` is not used).  ``ephemeral_id`` 0 means RSA key exchange.  An ephemeral key
serves one ``DERIVE`` / ``DERIVE_FINISH`` (valid point or not), is forgotten by ``RELEASE`` of
its handle id, and never leaves the guardian; a point that is not on the curve gets ``ERROR``
``BAD_KEY_EXCHANGE`` (the host sends the client ``illegal_parameter``).

Any request may instead get ``ERROR`` (:class:`Error`: an :class:`ErrorCode` and a message):
``LIMIT`` when a configured bound of the guardian was reached (see
:mod:`webalps_sim.aio.guardian`), ``UNKNOWN_HANDLE`` for a handle released, evicted or expired.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, TypeVar

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

from .codec import (
    BOOL,
    DEFAULT_MAX_FRAME_BYTES,
    HEADER,
    MAX_FRAME,
    RANDOM,
    RECV_SIZE,
    REST,
    U8,
    U16,
    U32,
    U64,
    ErrorCode,
    Field,
    Frame,
    FrameDecoder,
    FrameTooLarge,
    FrameType,
    ProtocolError,
    counted,
    encode_frame,
    lenient_utf8,
    optional_vector,
    pull_fields,
    push_fields,
    record,
    utf8,
    vector,
)

__all__ = [
    "MAX_FRAME", "DEFAULT_MAX_FRAME_BYTES", "HEADER", "RECV_SIZE", "FrameType", "ErrorCode",
    "ProtocolError", "FrameTooLarge", "Frame", "encode_frame", "FrameDecoder", "Message",
    "SealRecord", "OpenRecord", "Hello", "Info", "Ephemeral", "EphemeralReply", "Derive", "Resume",
    "VerifyData", "CheckFinished", "Seal", "Open", "Release", "Finish", "FinishReply",
    "DeriveFinish", "DerivedReply", "HandleReply", "DataReply", "BoolReply", "Sealed", "Opened",
    "Ok", "Error", "MESSAGES", "push_message", "pull_message", "decode_message", "message_frame",
]

Layout = tuple[tuple[str, Field], ...]
M = TypeVar("M", bound="Message")

V1, V2, V3 = vector(1), vector(2), vector(3)
#: handle id and suite: how every request about an existing handle starts
_HANDLE: Layout = (("handle_id", U64), ("cipher_suite", U16))
_DIRECTED: Layout = (*_HANDLE, ("from_client", BOOL))


class Message:
    """Base of every message: its frame type and its fields in wire order (``LAYOUT``)."""

    __slots__ = ()
    TYPE: ClassVar[FrameType]
    LAYOUT: ClassVar[Layout] = ()

    def to_payload(self) -> bytes:
        fast = _wire.ENCODERS.get(type(self))
        if fast is not None:
            try:
                return fast(self)
            except _wire.ENCODE_ERRORS:
                pass  # the reference below raises its own error
        w = Writer()
        push_message(w, self)
        return w.getvalue()

    @classmethod
    def from_payload(cls: type[M], payload: bytes) -> M:
        return pull_message(Buffer(payload), cls)


def push_message(w: Writer, message: Message) -> None:
    """Write ``message``'s payload (its ``LAYOUT``, in order)."""
    push_fields(w, message.LAYOUT, message)


def pull_message(buf: Buffer, cls: type[M]) -> M:
    """Read a whole ``cls`` payload; :class:`ProtocolError` if it is truncated, malformed or
    followed by anything."""
    try:
        fields = pull_fields(buf, cls.LAYOUT)
        buf.expect_end(cls.__name__)
    except DecodeError as exc:
        raise ProtocolError(f"malformed {cls.__name__}: {exc}") from None
    return cls(**fields)


class SealRecord(NamedTuple):
    """A record for the guardian to protect (``SEAL``), fields in wire order."""

    content_type: int
    version: int
    seq: int
    plaintext: bytes


class OpenRecord(NamedTuple):
    """A record for the guardian to open (``OPEN``), fields in wire order."""

    seq: int
    content_type: int
    version: int
    fragment: bytes


# --- requests ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello(Message):
    TYPE: ClassVar[FrameType] = FrameType.HELLO


@dataclass(frozen=True, slots=True)
class Ephemeral(Message):
    """A fresh ECDHE key of ``group`` for a handshake of ``cipher_suite`` (an ECDHE_RSA suite),
    and the signature with ``scheme`` over ``client_random + server_random + ServerECDHParams``
    (what the ServerKeyExchange carries)."""

    TYPE: ClassVar[FrameType] = FrameType.EPHEMERAL
    LAYOUT: ClassVar[Layout] = (
        ("group", U16), ("scheme", U16), ("client_random", RANDOM), ("server_random", RANDOM),
        ("cipher_suite", U16),
    )
    group: int
    scheme: int
    client_random: bytes
    server_random: bytes
    cipher_suite: int


@dataclass(frozen=True, slots=True)
class Derive(Message):
    """Keys of a full handshake.  RSA (``ephemeral_id`` 0): ``encrypted_premaster`` is the
    EncryptedPreMasterSecret.  ECDHE: ``ephemeral_id`` names an ``EPHEMERAL`` key and
    ``encrypted_premaster`` is the client's public point (``client_version`` unused)."""

    TYPE: ClassVar[FrameType] = FrameType.DERIVE
    LAYOUT: ClassVar[Layout] = (
        ("client_version", U16), ("client_random", RANDOM), ("server_random", RANDOM),
        ("cipher_suite", U16), ("session_hash", optional_vector(1, "session hash")),
        ("encrypted_premaster", V2), ("ephemeral_id", U32),
    )
    encrypted_premaster: bytes
    client_version: int
    client_random: bytes
    server_random: bytes
    cipher_suite: int
    session_hash: bytes | None
    ephemeral_id: int = 0


@dataclass(frozen=True, slots=True)
class Resume(Message):
    TYPE: ClassVar[FrameType] = FrameType.RESUME
    LAYOUT: ClassVar[Layout] = (*_HANDLE, ("client_random", RANDOM), ("server_random", RANDOM))
    handle_id: int
    cipher_suite: int
    client_random: bytes
    server_random: bytes


@dataclass(frozen=True, slots=True)
class VerifyData(Message):
    TYPE: ClassVar[FrameType] = FrameType.VERIFY_DATA
    LAYOUT: ClassVar[Layout] = (*_DIRECTED, ("transcript_hash", V1))
    handle_id: int
    cipher_suite: int
    from_client: bool
    transcript_hash: bytes


@dataclass(frozen=True, slots=True)
class CheckFinished(Message):
    TYPE: ClassVar[FrameType] = FrameType.CHECK_FINISHED
    LAYOUT: ClassVar[Layout] = (*_DIRECTED, ("transcript_hash", V1), ("verify_data", V1))
    handle_id: int
    cipher_suite: int
    from_client: bool
    transcript_hash: bytes
    verify_data: bytes


@dataclass(frozen=True, slots=True)
class Seal(Message):
    """Records to protect: :class:`SealRecord` ``(content_type, version, seq, plaintext)``,
    consecutive seqs."""

    TYPE: ClassVar[FrameType] = FrameType.SEAL
    LAYOUT: ClassVar[Layout] = (
        *_DIRECTED, ("records", counted(2, record(SealRecord, U8, U16, U64, V3))),
    )
    handle_id: int
    cipher_suite: int
    from_client: bool
    records: tuple[tuple[int, int, int, bytes], ...]


@dataclass(frozen=True, slots=True)
class Open(Message):
    """Records to open: :class:`OpenRecord` ``(seq, content_type, version, fragment)``,
    consecutive seqs."""

    TYPE: ClassVar[FrameType] = FrameType.OPEN
    LAYOUT: ClassVar[Layout] = (
        *_DIRECTED, ("records", counted(2, record(OpenRecord, U64, U8, U16, V3))),
    )
    handle_id: int
    cipher_suite: int
    from_client: bool
    records: tuple[tuple[int, int, int, bytes], ...]


@dataclass(frozen=True, slots=True)
class Release(Message):
    TYPE: ClassVar[FrameType] = FrameType.RELEASE
    LAYOUT: ClassVar[Layout] = (("handle_id", U64),)
    handle_id: int


@dataclass(frozen=True, slots=True)
class Finish(Message):
    """The Finished exchange of a full handshake in one request (``tls12.delegate``'s ``finish``).

    The guardian checks the client's verify_data against ``client_hash``; if right, it computes
    the server's over ``server_hash`` and also seals the server's Finished record (next server
    sequence number, record ``version``), which the host will send next anyway.
    """

    TYPE: ClassVar[FrameType] = FrameType.FINISH
    LAYOUT: ClassVar[Layout] = (
        *_HANDLE, ("client_hash", V1), ("client_verify_data", V1), ("server_hash", V1),
        ("version", U16),
    )
    handle_id: int
    cipher_suite: int
    client_hash: bytes
    client_verify_data: bytes
    server_hash: bytes
    version: int


@dataclass(frozen=True, slots=True)
class DeriveFinish(Message):
    """The client's whole key-exchange flight in one request (``tls12.delegate.FlightDelegate``).

    ``transcript``: every handshake message through the ClientKeyExchange (all public), hashed
    by the guardian for the extended master secret and both Finished values; ``fragment``: the
    client's encrypted Finished record (client record 0 of the new epoch, record ``version``).
    ``ephemeral_id`` and ``encrypted_premaster`` as in :class:`Derive` (0: RSA).
    """

    TYPE: ClassVar[FrameType] = FrameType.DERIVE_FINISH
    LAYOUT: ClassVar[Layout] = (
        ("client_version", U16), ("client_random", RANDOM), ("server_random", RANDOM),
        ("cipher_suite", U16), ("extended_master_secret", BOOL), ("encrypted_premaster", V2),
        ("transcript", V3), ("version", U16), ("fragment", V2), ("ephemeral_id", U32),
    )
    encrypted_premaster: bytes
    client_version: int
    client_random: bytes
    server_random: bytes
    cipher_suite: int
    extended_master_secret: bool
    transcript: bytes
    version: int
    fragment: bytes
    ephemeral_id: int = 0


# --- replies -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Info(Message):
    """Who the guardian is: its certificate chain (DER, leaf first), measurement, app, run id
    (fresh at every start: a host that sees it change knows all its handles are gone)."""

    TYPE: ClassVar[FrameType] = FrameType.INFO
    LAYOUT: ClassVar[Layout] = (
        ("chain", counted(1, vector(3, 1))), ("measurement", V1),
        ("app", utf8(1, "application name")), ("run_id", V1),
    )
    chain: tuple[bytes, ...]
    measurement: bytes
    app: str
    run_id: bytes


@dataclass(frozen=True, slots=True)
class FinishReply(Message):
    """``ok`` False: the client's Finished is wrong (nothing else is given)."""

    TYPE: ClassVar[FrameType] = FrameType.FINISHED
    LAYOUT: ClassVar[Layout] = (("ok", BOOL), ("verify_data", V1), ("seq", U64), ("sealed", V2))
    ok: bool
    verify_data: bytes = b""
    seq: int = 0
    sealed: bytes = b""


@dataclass(frozen=True, slots=True)
class DerivedReply(Message):
    """``DERIVE_FINISH`` done: the handle, the client's Finished message, the server's
    verify_data and its Finished record sealed at server sequence number ``seq`` (0).  A wrong
    Finished gets ``ERROR`` (``BAD_RECORD`` / ``BAD_FINISHED``) and the guardian keeps nothing."""

    TYPE: ClassVar[FrameType] = FrameType.DERIVED
    LAYOUT: ClassVar[Layout] = (
        *_HANDLE, ("client_finished", V1), ("verify_data", V1), ("seq", U64), ("sealed", V2),
    )
    handle_id: int
    cipher_suite: int
    client_finished: bytes
    verify_data: bytes
    seq: int
    sealed: bytes


@dataclass(frozen=True, slots=True)
class EphemeralReply(Message):
    """``EPHEMERAL`` done: the handle of the private key (for ``ephemeral_id``; ``RELEASE`` it
    if the ClientKeyExchange never comes), the public point and the ServerKeyExchange
    signature.  Nothing in it is secret."""

    TYPE: ClassVar[FrameType] = FrameType.EPHEMERAL_KEY
    LAYOUT: ClassVar[Layout] = (*_HANDLE, ("public", V1), ("signature", V2))
    handle_id: int
    cipher_suite: int
    public: bytes
    signature: bytes


@dataclass(frozen=True, slots=True)
class HandleReply(Message):
    TYPE: ClassVar[FrameType] = FrameType.HANDLE
    LAYOUT: ClassVar[Layout] = _HANDLE
    handle_id: int
    cipher_suite: int


@dataclass(frozen=True, slots=True)
class DataReply(Message):
    TYPE: ClassVar[FrameType] = FrameType.DATA
    LAYOUT: ClassVar[Layout] = (("data", REST),)
    data: bytes


@dataclass(frozen=True, slots=True)
class BoolReply(Message):
    TYPE: ClassVar[FrameType] = FrameType.BOOL
    LAYOUT: ClassVar[Layout] = (("value", BOOL),)
    value: bool


@dataclass(frozen=True, slots=True)
class Sealed(Message):
    TYPE: ClassVar[FrameType] = FrameType.SEALED
    LAYOUT: ClassVar[Layout] = (("records", REST),)
    records: bytes


@dataclass(frozen=True, slots=True)
class Opened(Message):
    """Plaintexts for the host (one per record opened; ``b""``: nothing for the host), the
    records the guardian sealed itself to answer a request (``count`` records, wire bytes), and
    ``close``: the client asked the guardian's answer to end the connection (HTTP/1.0 or
    ``Connection: close``), so the host should close it after sending those records."""

    TYPE: ClassVar[FrameType] = FrameType.OPENED
    LAYOUT: ClassVar[Layout] = (
        ("plaintexts", counted(2, V3)), ("sealed_count", U32), ("sealed", vector(4)),
        ("close", BOOL),
    )
    plaintexts: tuple[bytes, ...]
    sealed_count: int = 0
    sealed: bytes = b""
    close: bool = False


@dataclass(frozen=True, slots=True)
class Ok(Message):
    TYPE: ClassVar[FrameType] = FrameType.OK


@dataclass(frozen=True, slots=True)
class Error(Message):
    TYPE: ClassVar[FrameType] = FrameType.ERROR
    LAYOUT: ClassVar[Layout] = (("code", U16), ("message", lenient_utf8(2)))
    code: int
    message: str


MESSAGES: dict[int, type[Message]] = {
    cls.TYPE: cls
    for cls in (Hello, Info, Derive, Resume, VerifyData, CheckFinished, Seal, Open, Release,
                Finish, DeriveFinish, Ephemeral, HandleReply, DataReply, BoolReply, Sealed, Opened,
                Ok, FinishReply, DerivedReply, EphemeralReply, Error)
}
"""Frame type -> message class."""


def decode_message(frame: Frame) -> Any:
    """The message a frame carries; :class:`ProtocolError` (with its request id) if malformed."""
    fast = _wire.DECODERS.get(frame.type)
    if fast is not None:
        message = fast(frame.payload)
        if message is not None:
            return message
    try:
        return MESSAGES[frame.type].from_payload(frame.payload)
    except ProtocolError as exc:
        raise ProtocolError(str(exc), frame.request_id) from None


def message_frame(message: Message, request_id: int) -> bytes:
    """The frame carrying ``message``."""
    return encode_frame(message.TYPE, request_id, message.to_payload())


# the hot messages' hand-written codecs (the reference above decides anything they do not take);
# imported last: they build these classes
from . import _wire  # noqa: E402
