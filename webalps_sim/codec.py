"""The host<->guardian wire primitives: frames, and one pull/push pair per kind of field.

Two layers, both sans-IO:

* **frames** -- every message travels as one frame::

      uint32  length        bytes after this field (type + request id + payload)
      uint8   type          a FrameType
      uint32  request_id    chosen by the host; the reply carries the same id
      ...     payload       the message

  :func:`encode_frame` makes bytes; :class:`FrameDecoder` cuts a byte stream into
  :class:`Frame` values;
* **fields** -- a payload is a sequence of fields, each written by a :class:`Field`: a
  ``push(writer, value)`` / ``pull(buffer) -> value`` pair over :class:`tls12.buffer.Writer` and
  :class:`tls12.buffer.Buffer` (integers of fixed width, 32-byte randoms, vectors with 1- to
  4-byte lengths, strict booleans, optional vectors, counted lists of tuples).  A message
  (:mod:`webalps_sim.protocol`) declares its fields once, in wire order, and the same
  declaration encodes and decodes it, so the two directions cannot disagree.

Anything malformed -- an unknown type, a length above :data:`MAX_FRAME`, a truncated field,
trailing bytes -- is one :class:`ProtocolError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

from .errors import WebAlpsError

__all__ = [
    "MAX_FRAME", "DEFAULT_MAX_FRAME_BYTES", "HEADER", "RECV_SIZE", "FrameType", "ErrorCode", "ProtocolError", "FrameTooLarge",
    "Frame", "encode_frame", "FrameDecoder", "Field", "U8", "U16", "U32", "U64", "RANDOM", "BOOL",
    "vector", "optional_vector", "utf8", "lenient_utf8", "counted", "record", "REST",
    "pull_fields", "push_fields",
]

MAX_FRAME = 4 << 20
"""Largest accepted frame body: 32 records of 2^14 + 2048 bytes with room to spare."""

DEFAULT_MAX_FRAME_BYTES = (1 << 20) + (64 << 10)
"""The largest frame a guardian accepts from a host unless configured otherwise
(``--max-frame-bytes``): a ``SEAL`` of 1 MiB of plaintext (64 records with their fields) fits
with room to spare.  A host keeps each request frame at most this large."""

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
    EPHEMERAL = 0x0B
    INFO = 0x81
    HANDLE = 0x82
    DATA = 0x83
    BOOL = 0x84
    SEALED = 0x85
    OPENED = 0x86
    OK = 0x87
    FINISHED = 0x88
    DERIVED = 0x89
    EPHEMERAL_KEY = 0x8A
    ERROR = 0xFF


class ErrorCode(IntEnum):
    """Why a request failed (the ``ERROR`` reply)."""

    MALFORMED = 1
    """The frame could not be parsed; the guardian closes the connection after replying."""
    UNKNOWN_HANDLE = 2
    """No such handle: never made, released, evicted (least recently used beyond the guardian's
    session limit), idle past its lifetime, or freed with the host connection that made it."""
    BAD_RECORD = 3
    """A record did not open (bad MAC or padding: one error, no oracle)."""
    SEQUENCE = 4
    """A sequence number other than the next one: the host replayed, dropped or reordered."""
    UNSUPPORTED = 5
    INTERNAL = 6
    BAD_FINISHED = 7  # DERIVE_FINISH: not a Finished message with the right verify_data
    BAD_KEY_EXCHANGE = 8
    """ECDHE: the client's public point is not a valid point of the group (the host sends the
    client ``illegal_parameter``); the ephemeral key is spent all the same."""
    LIMIT = 9
    """A configured limit of the guardian was reached (host connections, frame size); the
    guardian closes that host connection after replying and serves the others."""


class ProtocolError(WebAlpsError):
    """A frame or message that does not parse; ``request_id`` when the header was readable."""

    def __init__(self, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.request_id = request_id


class FrameTooLarge(ProtocolError):
    """A frame header announcing more than the receiver's configured limit (at most
    :data:`MAX_FRAME`): a resource limit (``LIMIT``), not a malformed stream."""


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

    ``max_frame`` (at most :data:`MAX_FRAME`, the default) is the largest frame accepted, counted
    as the length field counts (type, request id and payload).  As soon as a header is in:
    :class:`ProtocolError` for a length below 5 or above :data:`MAX_FRAME` or an unknown type,
    :class:`FrameTooLarge` for a length above ``max_frame`` -- nothing of such a frame is
    buffered, so one connection holds at most ``max_frame + 4`` bytes here.  After either
    error the decoder is unusable (the stream has lost its framing)."""

    __slots__ = ("_buffer", "_failed", "max_frame")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        if not 5 <= max_frame <= MAX_FRAME:
            raise ValueError(f"max_frame must be 5..{MAX_FRAME}, not {max_frame}")
        self.max_frame = max_frame
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
            self._check_header(length, frame_type, request_id)
            if len(self._buffer) < 4 + length:
                break
            payload = bytes(self._buffer[HEADER.size : 4 + length])
            del self._buffer[: 4 + length]
            frames.append(Frame(frame_type, request_id, payload))
        return frames

    def _check_header(self, length: int, frame_type: int, request_id: int) -> None:
        if 5 <= length <= self.max_frame and frame_type in FrameType._value2member_map_:
            return
        self._failed = True
        self._buffer.clear()
        if length < 5 or length > MAX_FRAME:
            raise ProtocolError(f"frame length {length} outside 5..{MAX_FRAME}", request_id)
        if length > self.max_frame:
            raise FrameTooLarge(f"frame length {length} above this guardian's limit of "
                                f"{self.max_frame}", request_id)
        raise ProtocolError(f"unknown frame type 0x{frame_type:02x}", request_id)


# --- fields --------------------------------------------------------------------------------


class Field(NamedTuple):
    """How one field goes on the wire: ``push(writer, value)`` and ``pull(buffer) -> value``."""

    push: Callable[[Writer, Any], None]
    pull: Callable[[Buffer], Any]


def _uint(width: int) -> Field:
    return Field(lambda w, v: w.push_uint(v, width), lambda b: b.pull_uint(width))


def _pull_bool(buf: Buffer) -> bool:
    value = buf.pull_uint8()
    if value > 1:
        raise DecodeError(f"boolean byte {value}")
    return value == 1


U8, U16, U32, U64 = _uint(1), _uint(2), _uint(4), _uint(8)
RANDOM = Field(Writer.push_bytes, lambda b: b.pull_bytes(32))
"""A hello random: 32 bytes, no length (the encoder writes what it is given)."""
BOOL = Field(lambda w, v: w.push_uint8(1 if v else 0), _pull_bool)
"""One byte, 0 or 1; any other value does not parse."""
REST = Field(Writer.push_bytes, Buffer.pull_rest)
"""The rest of the payload, unframed (a message of one opaque field)."""


def vector(length_width: int, minimum: int = 0) -> Field:
    """Bytes behind a ``length_width``-byte length, at least ``minimum`` of them."""
    return Field(lambda w, v: w.push_vector(length_width, v),
                 lambda b: b.pull_vector(length_width, minimum))


def optional_vector(length_width: int, what: str = "value") -> Field:
    """``None`` or bytes: a presence flag (:data:`BOOL`), then the vector (empty if absent)."""

    def push(w: Writer, value: bytes | None) -> None:
        w.push_uint8(0 if value is None else 1)
        w.push_vector(length_width, value or b"")

    def pull(b: Buffer) -> bytes | None:
        present = _pull_bool(b)
        value = b.pull_vector(length_width)
        if not present and value:
            raise DecodeError(f"{what} given but flagged absent")
        return value if present else None

    return Field(push, pull)


def utf8(length_width: int, what: str = "text") -> Field:
    """Text as a vector of UTF-8; bytes that are not UTF-8 do not parse."""

    def pull(b: Buffer) -> str:
        try:
            return b.pull_vector(length_width).decode()
        except UnicodeDecodeError:
            raise DecodeError(f"{what} is not UTF-8") from None

    return Field(lambda w, v: w.push_vector(length_width, v.encode()), pull)


def lenient_utf8(length_width: int) -> Field:
    """Text for people (error messages): cut to fit the length on the way out, bad bytes
    replaced on the way in."""
    top = (1 << (8 * length_width)) - 1
    return Field(lambda w, v: w.push_vector(length_width, v.encode()[:top]),
                 lambda b: b.pull_vector(length_width).decode("utf-8", "replace"))


def counted(count_width: int, item: Field) -> Field:
    """A tuple of items behind a ``count_width``-byte item count."""

    def push(w: Writer, values: tuple[Any, ...]) -> None:
        w.push_uint(len(values), count_width)
        for value in values:
            item.push(w, value)

    return Field(push, lambda b: tuple(item.pull(b) for _ in range(b.pull_uint(count_width))))


def record(make: Callable[..., Any], *fields: Field) -> Field:
    """A tuple of fields in the given order, rebuilt with ``make`` (a NamedTuple class)."""

    def push(w: Writer, value: tuple[Any, ...]) -> None:
        for field, part in zip(fields, value, strict=True):
            field.push(w, part)

    return Field(push, lambda b: make(*(field.pull(b) for field in fields)))


def push_fields(w: Writer, layout: tuple[tuple[str, Field], ...], message: object) -> None:
    """Write ``message``'s attributes in the order of ``layout``."""
    for name, field in layout:
        field.push(w, getattr(message, name))


def pull_fields(buf: Buffer, layout: tuple[tuple[str, Field], ...]) -> dict[str, Any]:
    """Read the fields of ``layout`` in order: attribute name -> value."""
    return {name: field.pull(buf) for name, field in layout}
