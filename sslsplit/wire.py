"""The proxy--server protocol of SSL splitting (paper §3.3, §4.3, Figures 3--5).

The server talks to the proxy with three kinds of message, all framed like
TLS records (one type byte, a two-byte version, a two-byte length):

* **verbatim** (types 0x14--0x17): an ordinary TLS record, relayed as is.
  Everything the proxy sends to the server is verbatim: the client's records.
* **stub** (type = record type | 0x80, i.e. 0x94--0x97): a record with its
  payload replaced by an *id*::

      struct {
          uint8       content_type;   /* record type | 0x80 */
          uint8       version[2];
          uint16      length;         /* = 6 + len(id) + len(mac) */
          IDEncoding  encoding;       /* uint16 */
          opaque      id<0..2^14+2048>;
          opaque      mac<0..2^14+2048>;
      } StubMessage;

  ``literal`` (1): the id *is* the payload.  ``digest`` (2): SHA-1 of the
  payload, as in the paper.  ``digest_sha256`` (3, this testbed's default):
  SHA-256 -- SHA-1 collisions are practical today, and a proxy that could
  find two payloads with one SHA-1 id could not fool the client anyway (the
  MAC covers the payload) but could poison other proxies' caches.
* **key-expose** (type 0x58): the server-write encryption key and IV, sent
  right after the server's ChangeCipherSpec so the proxy can encrypt the
  records it rebuilds.  Never a MAC key, never a client-write key.

This module is the codec and a streaming reader; it does no I/O.  :func:`cut_messages` cuts a
whole buffer into messages in one call (the proxy's batch path, stubs as plain tuples);
:func:`pull_messages` is the same with :class:`Stub` objects.  Both accept and reject exactly
what :class:`MessageReader` does one message at a time.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from enum import IntEnum

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError, RecordOverflow
from tls12.record import MAX_CIPHERTEXT

__all__ = [
    "IDEncoding",
    "Verbatim",
    "Stub",
    "KeyExpose",
    "Message",
    "KEY_EXPOSE_TYPE",
    "STUB_FLAG",
    "MAX_FIELD",
    "MAX_MESSAGE_BODY",
    "payload_id",
    "payload_path",
    "check_payload",
    "push_message",
    "pull_message",
    "pull_messages",
    "cut_messages",
    "RawStub",
    "CutMessage",
    "stub_of",
    "MessageReader",
]

STUB_FLAG = 0x80
KEY_EXPOSE_TYPE = 0x58
MAX_FIELD = MAX_CIPHERTEXT  # 2^14 + 2048, the bound of every opaque field in Figures 4 and 5
MAX_MESSAGE_BODY = 6 + 2 * MAX_FIELD
_RECORD_TYPES = frozenset((0x14, 0x15, 0x16, 0x17))


class IDEncoding(IntEnum):
    LITERAL = 1
    DIGEST = 2  # SHA-1, the paper's encoding
    DIGEST_SHA256 = 3  # this testbed's default

    @property
    def digest_name(self) -> str | None:
        return {IDEncoding.DIGEST: "sha1", IDEncoding.DIGEST_SHA256: "sha256"}.get(self)


def payload_path(encoding: IDEncoding, ident: bytes) -> str:
    """The cache-miss protocol's request target for a payload: ``/payload/<encoding>/<hex id>``
    (paper §3.5; served by :func:`sslsplit.aio.payloads.serve_payloads`)."""
    return f"/payload/{int(encoding)}/{ident.hex()}"


def payload_id(encoding: IDEncoding, payload: bytes) -> bytes:
    """The id of ``payload`` under ``encoding``."""
    name = encoding.digest_name
    return payload if name is None else hashlib.new(name, payload).digest()


def check_payload(encoding: IDEncoding, ident: bytes, payload: bytes) -> bool:
    """Does ``payload`` have id ``ident``?  (The check a proxy makes on everything from a cache.)"""
    import hmac

    return hmac.compare_digest(payload_id(encoding, payload), ident)


@dataclass(frozen=True, slots=True)
class Verbatim:
    content_type: int
    version: int
    fragment: bytes


@dataclass(frozen=True, slots=True)
class Stub:
    content_type: int  # the *record* type (without the 0x80 flag)
    version: int
    encoding: IDEncoding
    ident: bytes
    mac: bytes


@dataclass(frozen=True, slots=True)
class KeyExpose:
    version: int
    key: bytes
    iv: bytes


Message = Verbatim | Stub | KeyExpose


def _header(msg_type: int, version: int, length: int) -> bytes:
    return bytes((msg_type, version >> 8, version & 0xFF)) + length.to_bytes(2, "big")


def push_message(msg: Message) -> bytes:
    """Encode one message, header included."""
    if isinstance(msg, Verbatim):
        if msg.content_type not in _RECORD_TYPES or len(msg.fragment) > MAX_FIELD:
            raise ValueError("not a valid TLS record")
        return _header(msg.content_type, msg.version, len(msg.fragment)) + msg.fragment
    w = Writer()
    if isinstance(msg, Stub):
        if msg.content_type not in _RECORD_TYPES:
            raise ValueError(f"bad record type {msg.content_type}")
        w.push_uint16(msg.encoding)
        w.push_vector(2, msg.ident)
        w.push_vector(2, msg.mac)
        body = w.getvalue()
        return _header(msg.content_type | STUB_FLAG, msg.version, len(body)) + body
    w.push_vector(2, msg.key)
    w.push_vector(2, msg.iv)
    body = w.getvalue()
    return _header(KEY_EXPOSE_TYPE, msg.version, len(body)) + body


_ENCODINGS = {int(e): e for e in IDEncoding}
_DIGEST_SIZE = {IDEncoding.DIGEST: 20, IDEncoding.DIGEST_SHA256: 32}


def _pull_stub(msg_type: int, version: int, body: bytes) -> Stub:
    """The stub body, parsed by hand: this is the proxy's per-record hot path."""
    n = len(body)
    if n < 6:
        raise DecodeError("stub truncated")
    raw_encoding = (body[0] << 8) | body[1]
    encoding = _ENCODINGS.get(raw_encoding)
    if encoding is None:
        raise DecodeError(f"unknown id encoding {raw_encoding}")
    id_end = 4 + ((body[2] << 8) | body[3])
    if id_end + 2 > n:
        raise DecodeError("stub id truncated")
    mac_end = id_end + 2 + ((body[id_end] << 8) | body[id_end + 1])
    if mac_end != n:
        raise DecodeError("stub MAC length does not match the message length")
    ident = body[4:id_end]
    size = _DIGEST_SIZE.get(encoding)
    if size is not None and len(ident) != size:
        raise DecodeError(f"digest id of {len(ident)} bytes for {encoding.name}")
    return Stub(msg_type & ~STUB_FLAG, version, encoding, ident, body[id_end + 2 : mac_end])


def pull_message(msg_type: int, version: int, body: bytes) -> Message:
    """Decode the body of one message whose header was already read."""
    if msg_type in _RECORD_TYPES:
        return Verbatim(msg_type, version, body)
    if msg_type & STUB_FLAG and (msg_type & ~STUB_FLAG) in _RECORD_TYPES:
        return _pull_stub(msg_type, version, body)
    if msg_type == KEY_EXPOSE_TYPE:
        buf = Buffer(body)
        key = buf.pull_vector(2, 0, MAX_FIELD)
        iv = buf.pull_vector(2, 0, MAX_FIELD)
        buf.expect_end("key-expose")
        return KeyExpose(version, key, iv)
    raise DecodeError(f"unknown message type 0x{msg_type:02x}")


RawStub = tuple[IDEncoding, bytes, int, int, bytes]
"""A stub as a plain tuple, ``(encoding, ident, content_type, version, mac)`` -- what the batch
path carries instead of a :class:`Stub` (a tuple costs a twentieth of a frozen dataclass);
``raw[:2]`` is the payload's cache key, ``Stub(*raw[2:4], *raw[:2], raw[4])`` the message."""


CutMessage = Verbatim | KeyExpose | RawStub
"""A message as :func:`cut_messages` returns it: every stub a :data:`RawStub`."""


def stub_of(raw: RawStub) -> Stub:
    """The :class:`Stub` a :data:`RawStub` stands for."""
    encoding, ident, content_type, version, mac = raw
    return Stub(content_type, version, encoding, ident, mac)


_HEAD = struct.Struct(">BHH")  # type, version, length
_U16 = struct.Struct(">H")
_U16X2 = struct.Struct(">HH")  # a stub body's encoding and id length
_STUB_TYPES = frozenset(t | STUB_FLAG for t in _RECORD_TYPES)
_SHA256_STUBS = {6 + 32 + mac: struct.Struct(f">HH32sH{mac}s").unpack_from for mac in (20, 32)}
"""The body layouts of the stubs a splitting server sends for every cached record -- a SHA-256 id
and an HMAC-SHA1 or -SHA256 MAC -- by message length: one ``unpack_from`` cuts such a body."""


def cut_messages(data: bytes, start: int = 0) -> tuple[list[CutMessage], int]:
    """Every whole message in ``data[start:]`` (stubs as :data:`RawStub` tuples), and the offset
    of the first byte not used.

    The batch form of :meth:`MessageReader.next_message`, with the same checks and errors, in
    the same order: messages are cut up to the first incomplete or bad one.  A bad message
    (DecodeError, or RecordOverflow for a length over its type's bound, raised from its header
    alone) is raised only when it comes first -- the messages before it are returned and the
    offset stops at it, so the next call raises.  Stub bodies are parsed inline (the hot path);
    one a check of :func:`pull_message` would reject goes through it, for the same error.
    """
    if not isinstance(data, bytes):
        raise TypeError(f"cut_messages takes bytes, not {type(data).__name__}")  # ids must be hashable
    n = len(data)
    pos = start
    out: list[CutMessage] = []
    append = out.append
    head, u16, u16x2 = _HEAD.unpack_from, _U16.unpack_from, _U16X2.unpack_from
    fixed_layouts = _SHA256_STUBS
    sha256 = IDEncoding.DIGEST_SHA256
    stub_types = _STUB_TYPES
    record_types = _RECORD_TYPES
    encodings = _ENCODINGS
    digest_size = _DIGEST_SIZE
    try:
        while pos + 5 <= n:
            msg_type, version, length = head(data, pos)
            if length > (MAX_FIELD if msg_type in record_types else MAX_MESSAGE_BODY):
                raise RecordOverflow(f"message of {length} bytes exceeds "
                                     f"{MAX_FIELD if msg_type in record_types else MAX_MESSAGE_BODY}")
            body = pos + 5
            end = body + length
            if end > n:
                break
            fixed = fixed_layouts.get(length)
            if fixed is not None and msg_type in stub_types:  # the common stub, in one call
                raw_encoding, id_length, ident, mac_length, mac = fixed(data, body)
                if raw_encoding == sha256 and id_length == 32 and 38 + mac_length == length:
                    append((sha256, ident, msg_type & ~STUB_FLAG, version, mac))
                    pos = end
                    continue
            if msg_type & STUB_FLAG and length >= 6 and (msg_type & ~STUB_FLAG) in record_types:
                raw_encoding, id_length = u16x2(data, body)
                encoding = encodings.get(raw_encoding)
                id_end = body + 4 + id_length
                if encoding is not None and id_end + 2 <= end and id_end + 2 + u16(data, id_end)[0] == end:
                    ident = data[body + 4 : id_end]
                    size = digest_size.get(encoding)
                    if size is None or len(ident) == size:
                        append((encoding, ident, msg_type & ~STUB_FLAG, version, data[id_end + 2 : end]))
                        pos = end
                        continue
            msg = pull_message(msg_type, version, data[body:end])  # raises for every stub left
            append((msg.encoding, msg.ident, msg.content_type, msg.version, msg.mac) if isinstance(msg, Stub) else msg)
            pos = end
    except (DecodeError, RecordOverflow):
        if not out:
            raise
    return out, pos


def pull_messages(data: bytes, start: int = 0) -> tuple[list[Message], int]:
    """:func:`cut_messages` with every stub a :class:`Stub`: the messages
    :meth:`MessageReader.next_message` would return one by one, and the offset after them."""
    cut, end = cut_messages(data, start)
    return [stub_of(m) if isinstance(m, tuple) else m for m in cut], end


class MessageReader:
    """Cuts a byte stream into messages; buffers at most one partial message."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def next_message(self) -> Message | None:
        buf = self._buffer
        if len(buf) < 5:
            return None
        length = (buf[3] << 8) | buf[4]
        limit = MAX_FIELD if buf[0] in _RECORD_TYPES else MAX_MESSAGE_BODY
        if length > limit:
            raise RecordOverflow(f"message of {length} bytes exceeds {limit}")
        if len(buf) < 5 + length:
            return None
        msg_type, version = buf[0], (buf[1] << 8) | buf[2]
        body = bytes(buf[5 : 5 + length])
        del buf[: 5 + length]
        return pull_message(msg_type, version, body)

    def cut(self) -> list[CutMessage]:
        """Every whole message buffered, in one call (:func:`cut_messages`); [] if none.

        One copy of the buffered bytes per call, so a caller takes all of them at once and
        splices them in runs of its own size.
        """
        buf = self._buffer
        if len(buf) < 5:
            return []
        msgs, end = cut_messages(bytes(buf))
        del buf[:end]
        return msgs
