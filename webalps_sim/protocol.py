"""The host<->guardian protocol: length-prefixed typed frames, one request id per frame.

The host (untrusted) and the guardian (the coprocessor's role) talk over a local stream socket.
Every message is one **frame**::

    uint32  length        bytes after this field (type + request id + payload)
    uint8   type          a FrameType
    uint32  request_id    chosen by the host; the reply carries the same id
    ...     payload       the message, its own fields length-prefixed

This module is sans-IO: :func:`encode_frame` makes bytes, :class:`FrameDecoder` turns a byte
stream into :class:`Frame` values, and each message is a frozen dataclass with ``to_payload`` /
``from_payload``.  Anything malformed -- an unknown type, a length above :data:`MAX_FRAME`, a
truncated field, trailing bytes after the last field -- is one typed :class:`ProtocolError`,
never a crash: the guardian answers it with an :class:`Error` frame and closes that host
connection only.

Requests (host -> guardian) and their replies:

=================  ===============================  ===========================================
request            does                             reply
=================  ===============================  ===========================================
``HELLO``          identify the guardian            ``INFO`` (chain, measurement, app, run id)
``DERIVE``         RSA-decrypt the premaster, keys  ``HANDLE``
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
=================  ===============================  ===========================================

A full handshake costs one exchange (``DERIVE_FINISH``) when the client's flight reaches the
host whole, else three (``DERIVE``, ``OPEN``, ``FINISH``); a request costs ``OPEN`` + ``SEAL``.

Any request may instead get ``ERROR`` (:class:`Error`: an :class:`ErrorCode` and a message).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

__all__ = [
    "MAX_FRAME", "HEADER", "RECV_SIZE", "FrameType", "ErrorCode", "ProtocolError", "Frame", "encode_frame",
    "FrameDecoder", "Hello", "Info", "Derive", "Resume", "VerifyData", "CheckFinished", "Seal",
    "Open", "Release", "Finish", "FinishReply", "DeriveFinish", "DerivedReply", "HandleReply",
    "DataReply", "BoolReply", "Sealed", "Opened", "Ok", "Error", "MESSAGES", "decode_message",
    "message_frame",
]

MAX_FRAME = 4 << 20
"""Largest accepted frame body: 32 records of 2^14 + 2048 bytes with room to spare."""

HEADER = struct.Struct(">IBI")
"""length, type, request id."""

#: Bytes per socket read at either end, into one buffer per connection (a fresh 1 MiB recv
#: buffer costs an mmap per read: several times a bare round trip).
RECV_SIZE = 1 << 18


class FrameType(IntEnum):
    HELLO = 0x01
    DERIVE = 0x02
    RESUME = 0x03
    VERIFY_DATA = 0x04
    CHECK_FINISHED = 0x05
    SEAL = 0x06
    OPEN = 0x07
    RELEASE = 0x08
    FINISH = 0x09
    DERIVE_FINISH = 0x0A
    INFO = 0x81
    HANDLE = 0x82
    DATA = 0x83
    BOOL = 0x84
    SEALED = 0x85
    OPENED = 0x86
    OK = 0x87
    FINISHED = 0x88
    DERIVED = 0x89
    ERROR = 0xFF


class ErrorCode(IntEnum):
    """Why a request failed (the :class:`Error` reply)."""

    MALFORMED = 1
    """The frame could not be parsed; the guardian closes the connection after replying."""
    UNKNOWN_HANDLE = 2
    BAD_RECORD = 3
    """A record did not open (bad MAC or padding: one error, no oracle)."""
    SEQUENCE = 4
    """A sequence number other than the next one: the host replayed, dropped or reordered."""
    UNSUPPORTED = 5
    INTERNAL = 6
    BAD_FINISHED = 7  # DERIVE_FINISH: not a Finished message with the right verify_data


class ProtocolError(Exception):
    """A frame or message that does not parse; ``request_id`` when the header was readable."""

    def __init__(self, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class Frame:
    type: int
    request_id: int
    payload: bytes


def encode_frame(frame_type: int, request_id: int, payload: bytes) -> bytes:
    """The bytes of one frame."""
    if len(payload) + 5 > MAX_FRAME:
        raise ValueError(f"payload of {len(payload)} bytes exceeds the frame limit")
    return HEADER.pack(len(payload) + 5, frame_type, request_id) + payload


class FrameDecoder:
    """Cuts a byte stream into frames: ``feed(data)`` returns the frames now complete.

    :class:`ProtocolError` for a length below 5 or above :data:`MAX_FRAME` or an unknown type
    as soon as the header is in (nothing of an oversized frame is buffered); then the decoder
    is unusable (the stream has lost its framing)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._failed = False

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes | memoryview) -> list[Frame]:
        if self._failed:
            raise ProtocolError("the frame stream already failed")
        self._buffer += data
        frames = []
        while len(self._buffer) >= HEADER.size:
            length, frame_type, request_id = HEADER.unpack_from(self._buffer)
            if length < 5 or length > MAX_FRAME:
                self._failed = True
                raise ProtocolError(f"frame length {length} outside 5..{MAX_FRAME}", request_id)
            if frame_type not in FrameType._value2member_map_:
                self._failed = True
                raise ProtocolError(f"unknown frame type 0x{frame_type:02x}", request_id)
            if len(self._buffer) < 4 + length:
                break
            payload = bytes(self._buffer[HEADER.size : 4 + length])
            del self._buffer[: 4 + length]
            frames.append(Frame(frame_type, request_id, payload))
        return frames


# --- messages ------------------------------------------------------------------------------


def _parse(cls: type, payload: bytes, pull):  # type: ignore[no-untyped-def]
    buf = Buffer(payload)
    try:
        message = pull(buf)
        buf.expect_end(cls.__name__)
    except DecodeError as exc:
        raise ProtocolError(f"malformed {cls.__name__}: {exc}") from None
    return message


def _push_handle(w: Writer, handle_id: int, suite: int, from_client: bool | None = None) -> None:
    w.push_uint(handle_id, 8)
    w.push_uint16(suite)
    if from_client is not None:
        w.push_uint8(1 if from_client else 0)


def _pull_bool(buf: Buffer) -> bool:
    value = buf.pull_uint8()
    if value > 1:
        raise DecodeError(f"boolean byte {value}")
    return value == 1


@dataclass(frozen=True, slots=True)
class Hello:
    TYPE: ClassVar[FrameType] = FrameType.HELLO

    def to_payload(self) -> bytes:
        return b""

    @classmethod
    def from_payload(cls, payload: bytes) -> Hello:
        return _parse(cls, payload, lambda buf: cls())  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Info:
    """Who the guardian is: its certificate chain (DER, leaf first), measurement, app, run id
    (fresh at every start: a host that sees it change knows all its handles are gone)."""

    TYPE: ClassVar[FrameType] = FrameType.INFO
    chain: tuple[bytes, ...]
    measurement: bytes
    app: str
    run_id: bytes

    def to_payload(self) -> bytes:
        w = Writer()
        w.push_uint8(len(self.chain))
        for cert in self.chain:
            w.push_vector(3, cert)
        w.push_vector(1, self.measurement)
        w.push_vector(1, self.app.encode())
        w.push_vector(1, self.run_id)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Info:
        def pull(buf: Buffer) -> Info:
            chain = tuple(buf.pull_vector(3, 1) for _ in range(buf.pull_uint8()))
            measurement = buf.pull_vector(1)
            try:
                app = buf.pull_vector(1).decode()
            except UnicodeDecodeError:
                raise DecodeError("application name is not UTF-8") from None
            return cls(chain, measurement, app, buf.pull_vector(1))

        return _parse(cls, payload, pull)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Derive:
    TYPE: ClassVar[FrameType] = FrameType.DERIVE
    encrypted_premaster: bytes
    client_version: int
    client_random: bytes
    server_random: bytes
    cipher_suite: int
    session_hash: bytes | None

    def to_payload(self) -> bytes:
        w = Writer()
        w.push_uint16(self.client_version)
        w.push_bytes(self.client_random)
        w.push_bytes(self.server_random)
        w.push_uint16(self.cipher_suite)
        w.push_uint8(0 if self.session_hash is None else 1)
        w.push_vector(1, self.session_hash or b"")
        w.push_vector(2, self.encrypted_premaster)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Derive:
        def pull(buf: Buffer) -> Derive:
            version = buf.pull_uint16()
            client_random, server_random = buf.pull_bytes(32), buf.pull_bytes(32)
            suite = buf.pull_uint16()
            has_hash = _pull_bool(buf)
            session_hash = buf.pull_vector(1)
            if not has_hash and session_hash:
                raise DecodeError("session hash given but flagged absent")
            encrypted = buf.pull_vector(2)
            return cls(encrypted, version, client_random, server_random, suite,
                       session_hash if has_hash else None)

        return _parse(cls, payload, pull)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Resume:
    TYPE: ClassVar[FrameType] = FrameType.RESUME
    handle_id: int
    cipher_suite: int
    client_random: bytes
    server_random: bytes

    def to_payload(self) -> bytes:
        w = Writer()
        _push_handle(w, self.handle_id, self.cipher_suite)
        w.push_bytes(self.client_random + self.server_random)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Resume:
        return _parse(cls, payload, lambda buf: cls(  # type: ignore[no-any-return]
            buf.pull_uint(8), buf.pull_uint16(), buf.pull_bytes(32), buf.pull_bytes(32)))


@dataclass(frozen=True, slots=True)
class VerifyData:
    TYPE: ClassVar[FrameType] = FrameType.VERIFY_DATA
    handle_id: int
    cipher_suite: int
    from_client: bool
    transcript_hash: bytes

    def to_payload(self) -> bytes:
        w = Writer()
        _push_handle(w, self.handle_id, self.cipher_suite, self.from_client)
        w.push_vector(1, self.transcript_hash)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> VerifyData:
        return _parse(cls, payload, lambda buf: cls(  # type: ignore[no-any-return]
            buf.pull_uint(8), buf.pull_uint16(), _pull_bool(buf), buf.pull_vector(1)))


@dataclass(frozen=True, slots=True)
class CheckFinished:
    TYPE: ClassVar[FrameType] = FrameType.CHECK_FINISHED
    handle_id: int
    cipher_suite: int
    from_client: bool
    transcript_hash: bytes
    verify_data: bytes

    def to_payload(self) -> bytes:
        w = Writer()
        _push_handle(w, self.handle_id, self.cipher_suite, self.from_client)
        w.push_vector(1, self.transcript_hash)
        w.push_vector(1, self.verify_data)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> CheckFinished:
        return _parse(cls, payload, lambda buf: cls(  # type: ignore[no-any-return]
            buf.pull_uint(8), buf.pull_uint16(), _pull_bool(buf), buf.pull_vector(1),
            buf.pull_vector(1)))


@dataclass(frozen=True, slots=True)
class Seal:
    """Records to protect: ``(content_type, version, seq, plaintext)``, consecutive seqs."""

    TYPE: ClassVar[FrameType] = FrameType.SEAL
    handle_id: int
    cipher_suite: int
    from_client: bool
    records: tuple[tuple[int, int, int, bytes], ...]

    def to_payload(self) -> bytes:
        w = Writer()
        _push_handle(w, self.handle_id, self.cipher_suite, self.from_client)
        w.push_uint16(len(self.records))
        for content_type, version, seq, plaintext in self.records:
            w.push_uint8(content_type)
            w.push_uint16(version)
            w.push_uint(seq, 8)
            w.push_vector(3, plaintext)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Seal:
        def pull(buf: Buffer) -> Seal:
            head = (buf.pull_uint(8), buf.pull_uint16(), _pull_bool(buf))
            records = tuple(
                (buf.pull_uint8(), buf.pull_uint16(), buf.pull_uint(8), buf.pull_vector(3))
                for _ in range(buf.pull_uint16())
            )
            return cls(*head, records)

        return _parse(cls, payload, pull)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Open:
    """Records to open: ``(seq, content_type, version, fragment)``, consecutive seqs."""

    TYPE: ClassVar[FrameType] = FrameType.OPEN
    handle_id: int
    cipher_suite: int
    from_client: bool
    records: tuple[tuple[int, int, int, bytes], ...]

    def to_payload(self) -> bytes:
        w = Writer()
        _push_handle(w, self.handle_id, self.cipher_suite, self.from_client)
        w.push_uint16(len(self.records))
        for seq, content_type, version, fragment in self.records:
            w.push_uint(seq, 8)
            w.push_uint8(content_type)
            w.push_uint16(version)
            w.push_vector(3, fragment)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Open:
        def pull(buf: Buffer) -> Open:
            head = (buf.pull_uint(8), buf.pull_uint16(), _pull_bool(buf))
            records = tuple(
                (buf.pull_uint(8), buf.pull_uint8(), buf.pull_uint16(), buf.pull_vector(3))
                for _ in range(buf.pull_uint16())
            )
            return cls(*head, records)

        return _parse(cls, payload, pull)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Release:
    TYPE: ClassVar[FrameType] = FrameType.RELEASE
    handle_id: int

    def to_payload(self) -> bytes:
        return self.handle_id.to_bytes(8, "big")

    @classmethod
    def from_payload(cls, payload: bytes) -> Release:
        return _parse(cls, payload, lambda buf: cls(buf.pull_uint(8)))  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Finish:
    """The Finished exchange of a full handshake in one request (``tls12.delegate``'s ``finish``).

    The guardian checks the client's verify_data against ``client_hash``; if right, it computes
    the server's over ``server_hash`` and also seals the server's Finished record (next server
    sequence number, record ``version``), which the host will send next anyway.
    """

    TYPE: ClassVar[FrameType] = FrameType.FINISH
    handle_id: int
    cipher_suite: int
    client_hash: bytes
    client_verify_data: bytes
    server_hash: bytes
    version: int

    def to_payload(self) -> bytes:
        w = Writer()
        _push_handle(w, self.handle_id, self.cipher_suite)
        w.push_vector(1, self.client_hash)
        w.push_vector(1, self.client_verify_data)
        w.push_vector(1, self.server_hash)
        w.push_uint16(self.version)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Finish:
        return _parse(cls, payload, lambda buf: cls(  # type: ignore[no-any-return]
            buf.pull_uint(8), buf.pull_uint16(), buf.pull_vector(1), buf.pull_vector(1),
            buf.pull_vector(1), buf.pull_uint16()))


@dataclass(frozen=True, slots=True)
class FinishReply:
    """``ok`` False: the client's Finished is wrong (nothing else is given)."""

    TYPE: ClassVar[FrameType] = FrameType.FINISHED
    ok: bool
    verify_data: bytes = b""
    seq: int = 0
    sealed: bytes = b""

    def to_payload(self) -> bytes:
        w = Writer()
        w.push_uint8(1 if self.ok else 0)
        w.push_vector(1, self.verify_data)
        w.push_uint(self.seq, 8)
        w.push_vector(2, self.sealed)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> FinishReply:
        return _parse(cls, payload, lambda buf: cls(  # type: ignore[no-any-return]
            _pull_bool(buf), buf.pull_vector(1), buf.pull_uint(8), buf.pull_vector(2)))


@dataclass(frozen=True, slots=True)
class DeriveFinish:
    """The client's whole key-exchange flight in one request (``tls12.delegate.FlightDelegate``).

    ``transcript``: every handshake message through the ClientKeyExchange (all public), hashed
    by the guardian for the extended master secret and both Finished values; ``fragment``: the
    client's encrypted Finished record (client record 0 of the new epoch, record ``version``).
    """

    TYPE: ClassVar[FrameType] = FrameType.DERIVE_FINISH
    encrypted_premaster: bytes
    client_version: int
    client_random: bytes
    server_random: bytes
    cipher_suite: int
    extended_master_secret: bool
    transcript: bytes
    version: int
    fragment: bytes

    def to_payload(self) -> bytes:
        w = Writer()
        w.push_uint16(self.client_version)
        w.push_bytes(self.client_random)
        w.push_bytes(self.server_random)
        w.push_uint16(self.cipher_suite)
        w.push_uint8(1 if self.extended_master_secret else 0)
        w.push_vector(2, self.encrypted_premaster)
        w.push_vector(3, self.transcript)
        w.push_uint16(self.version)
        w.push_vector(2, self.fragment)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> DeriveFinish:
        def pull(buf: Buffer) -> DeriveFinish:
            version = buf.pull_uint16()
            client_random, server_random = buf.pull_bytes(32), buf.pull_bytes(32)
            suite = buf.pull_uint16()
            ems = _pull_bool(buf)
            encrypted = buf.pull_vector(2)
            return cls(encrypted, version, client_random, server_random, suite, ems,
                       buf.pull_vector(3), buf.pull_uint16(), buf.pull_vector(2))

        return _parse(cls, payload, pull)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class DerivedReply:
    """``DERIVE_FINISH`` done: the handle, the client's Finished message, the server's
    verify_data and its Finished record sealed at server sequence number ``seq`` (0).  A wrong
    Finished gets ``ERROR`` (``BAD_RECORD`` / ``BAD_FINISHED``) and the guardian keeps nothing."""

    TYPE: ClassVar[FrameType] = FrameType.DERIVED
    handle_id: int
    cipher_suite: int
    client_finished: bytes
    verify_data: bytes
    seq: int
    sealed: bytes

    def to_payload(self) -> bytes:
        w = Writer()
        _push_handle(w, self.handle_id, self.cipher_suite)
        w.push_vector(1, self.client_finished)
        w.push_vector(1, self.verify_data)
        w.push_uint(self.seq, 8)
        w.push_vector(2, self.sealed)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> DerivedReply:
        return _parse(cls, payload, lambda buf: cls(  # type: ignore[no-any-return]
            buf.pull_uint(8), buf.pull_uint16(), buf.pull_vector(1), buf.pull_vector(1),
            buf.pull_uint(8), buf.pull_vector(2)))


@dataclass(frozen=True, slots=True)
class HandleReply:
    TYPE: ClassVar[FrameType] = FrameType.HANDLE
    handle_id: int
    cipher_suite: int

    def to_payload(self) -> bytes:
        return self.handle_id.to_bytes(8, "big") + self.cipher_suite.to_bytes(2, "big")

    @classmethod
    def from_payload(cls, payload: bytes) -> HandleReply:
        return _parse(cls, payload, lambda buf: cls(  # type: ignore[no-any-return]
            buf.pull_uint(8), buf.pull_uint16()))


@dataclass(frozen=True, slots=True)
class DataReply:
    TYPE: ClassVar[FrameType] = FrameType.DATA
    data: bytes

    def to_payload(self) -> bytes:
        return self.data

    @classmethod
    def from_payload(cls, payload: bytes) -> DataReply:
        return cls(payload)


@dataclass(frozen=True, slots=True)
class BoolReply:
    TYPE: ClassVar[FrameType] = FrameType.BOOL
    value: bool

    def to_payload(self) -> bytes:
        return b"\x01" if self.value else b"\x00"

    @classmethod
    def from_payload(cls, payload: bytes) -> BoolReply:
        return _parse(cls, payload, lambda buf: cls(_pull_bool(buf)))  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Sealed:
    TYPE: ClassVar[FrameType] = FrameType.SEALED
    records: bytes

    def to_payload(self) -> bytes:
        return self.records

    @classmethod
    def from_payload(cls, payload: bytes) -> Sealed:
        return cls(payload)


@dataclass(frozen=True, slots=True)
class Opened:
    """Plaintexts for the host (one per record opened; ``b""``: nothing for the host), the
    records the guardian sealed itself to answer a request (``count`` records, wire bytes), and
    ``close``: the client asked the guardian's answer to end the connection (HTTP/1.0 or
    ``Connection: close``), so the host should close it after sending those records."""

    TYPE: ClassVar[FrameType] = FrameType.OPENED
    plaintexts: tuple[bytes, ...]
    sealed_count: int = 0
    sealed: bytes = b""
    close: bool = False

    def to_payload(self) -> bytes:
        w = Writer()
        w.push_uint16(len(self.plaintexts))
        for p in self.plaintexts:
            w.push_vector(3, p)
        w.push_uint(self.sealed_count, 4)
        w.push_uint(len(self.sealed), 4)
        w.push_bytes(self.sealed)
        w.push_uint8(1 if self.close else 0)
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Opened:
        def pull(buf: Buffer) -> Opened:
            plaintexts = tuple(buf.pull_vector(3) for _ in range(buf.pull_uint16()))
            count = buf.pull_uint(4)
            sealed = buf.pull_bytes(buf.pull_uint(4))
            return cls(plaintexts, count, sealed, _pull_bool(buf))

        return _parse(cls, payload, pull)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Ok:
    TYPE: ClassVar[FrameType] = FrameType.OK

    def to_payload(self) -> bytes:
        return b""

    @classmethod
    def from_payload(cls, payload: bytes) -> Ok:
        return _parse(cls, payload, lambda buf: cls())  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Error:
    TYPE: ClassVar[FrameType] = FrameType.ERROR
    code: int
    message: str

    def to_payload(self) -> bytes:
        w = Writer()
        w.push_uint16(self.code)
        w.push_vector(2, self.message.encode()[:65535])
        return w.getvalue()

    @classmethod
    def from_payload(cls, payload: bytes) -> Error:
        def pull(buf: Buffer) -> Error:
            code = buf.pull_uint16()
            return cls(code, buf.pull_vector(2).decode("utf-8", "replace"))

        return _parse(cls, payload, pull)  # type: ignore[no-any-return]


MESSAGES: dict[int, type] = {
    cls.TYPE: cls
    for cls in (Hello, Info, Derive, Resume, VerifyData, CheckFinished, Seal, Open, Release,
                Finish, DeriveFinish, HandleReply, DataReply, BoolReply, Sealed, Opened, Ok,
                FinishReply, DerivedReply, Error)
}
"""Frame type -> message class."""


def decode_message(frame: Frame):  # type: ignore[no-untyped-def]
    """The message a frame carries; :class:`ProtocolError` (with its request id) if malformed."""
    try:
        return MESSAGES[frame.type].from_payload(frame.payload)
    except ProtocolError as exc:
        raise ProtocolError(str(exc), frame.request_id) from None


def message_frame(message, request_id: int) -> bytes:  # type: ignore[no-untyped-def]
    """The frame carrying ``message``."""
    return encode_frame(message.TYPE, request_id, message.to_payload())
