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

This module is the codec and a streaming reader; it does no I/O.
"""

from __future__ import annotations

import hashlib
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
