"""Hand-written codecs of the messages on the hot path (``OPEN``, ``SEAL`` and their replies).

Every request of a served connection is an ``OPEN`` and a ``SEAL``; the declarative codec of
:mod:`webalps_sim.codec` (one :class:`~webalps_sim.codec.Field` call per field) is the
reference, and these functions give the same bytes and the same messages with one
``struct`` call per record (``tests/webalps_sim/test_protocol.py`` checks both on random
messages and on damaged payloads).  They accept only what the reference accepts:

* an encoder that meets anything unusual (a value out of range, a record of the wrong shape)
  raises, and :meth:`webalps_sim.protocol.Message.to_payload` then runs the reference, which
  raises its own error;
* a decoder returns ``None`` for anything but a well-formed payload, and
  :func:`webalps_sim.protocol.decode_message` then runs the reference, which names the fault.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

from . import protocol as p

_T = TypeVar("_T")

__all__ = ["DECODERS", "ENCODERS", "ENCODE_ERRORS"]

_DIRECTED = struct.Struct(">QHBH")  # handle id, suite, from_client, record count
_OPEN_RECORD = struct.Struct(">QBH")  # seq, content type, version (then a 3-byte length)
_SEAL_RECORD = struct.Struct(">BHQ")  # content type, version, seq (then a 3-byte length)
_U64 = struct.Struct(">Q")
_OPENED_TAIL = struct.Struct(">II")  # sealed_count, length of sealed

ENCODE_ERRORS = (struct.error, OverflowError, TypeError, ValueError, AttributeError)
"""What a fast encoder may raise for a message the reference must judge."""


def _push_records(head: bytes, records: Any, pack: Callable[..., bytes], open_: bool) -> bytes:
    parts = [head]
    for record in records:
        if open_:
            seq, content_type, version, data = record
            fixed = pack(seq, content_type, version)
        else:
            content_type, version, seq, data = record
            fixed = pack(content_type, version, seq)
        parts += (fixed, len(data).to_bytes(3, "big"), data)
    return b"".join(parts)


def _push_open(m: p.Open) -> bytes:
    head = _DIRECTED.pack(m.handle_id, m.cipher_suite, 1 if m.from_client else 0, len(m.records))
    return _push_records(head, m.records, _OPEN_RECORD.pack, True)


def _push_seal(m: p.Seal) -> bytes:
    head = _DIRECTED.pack(m.handle_id, m.cipher_suite, 1 if m.from_client else 0, len(m.records))
    return _push_records(head, m.records, _SEAL_RECORD.pack, False)


def _pull_records(payload: bytes, make: Callable[..., _T], unpack: Callable[..., tuple[int, ...]]
                  ) -> _T | None:
    """The directed head and its records, as ``make(handle, suite, from_client, records)``."""
    size = len(payload)
    if size < _DIRECTED.size:
        return None
    handle_id, suite, from_client, count = _DIRECTED.unpack_from(payload)
    if from_client > 1:
        return None
    pos, records = _DIRECTED.size, []
    for _ in range(count):
        start = pos + 14
        if start > size:
            return None
        fields = unpack(payload, pos)
        end = start + int.from_bytes(payload[pos + 11 : start], "big")
        if end > size:
            return None
        records.append((*fields, payload[start:end]))
        pos = end
    if pos != size:
        return None
    return make(handle_id, suite, from_client == 1, records)


def _pull_open(payload: bytes) -> p.Open | None:
    return _pull_records(payload, lambda h, s, c, rs: p.Open(
        h, s, c, tuple(p.OpenRecord(*r) for r in rs)), _OPEN_RECORD.unpack_from)


def _pull_seal(payload: bytes) -> p.Seal | None:
    return _pull_records(payload, lambda h, s, c, rs: p.Seal(
        h, s, c, tuple(p.SealRecord(*r) for r in rs)), _SEAL_RECORD.unpack_from)


def _push_opened(m: p.Opened) -> bytes:
    parts = [len(m.plaintexts).to_bytes(2, "big")]
    for plaintext in m.plaintexts:
        parts += (len(plaintext).to_bytes(3, "big"), plaintext)
    parts += (_OPENED_TAIL.pack(m.sealed_count, len(m.sealed)), m.sealed,
              b"\x01" if m.close else b"\x00")
    return b"".join(parts)


def _pull_opened(payload: bytes) -> p.Opened | None:
    size = len(payload)
    if size < 2:
        return None
    pos, plaintexts = 2, []
    for _ in range(int.from_bytes(payload[:2], "big")):
        start = pos + 3
        end = start + int.from_bytes(payload[pos:start], "big")
        if start > size or end > size:
            return None
        plaintexts.append(payload[start:end])
        pos = end
    if pos + _OPENED_TAIL.size > size:
        return None
    count, length = _OPENED_TAIL.unpack_from(payload, pos)
    start = pos + _OPENED_TAIL.size
    end = start + length
    if end + 1 != size or payload[end] > 1:
        return None
    return p.Opened(tuple(plaintexts), count, payload[start:end], payload[end] == 1)


def _push_sealed(m: p.Sealed) -> bytes:
    if not isinstance(m.records, bytes):
        raise TypeError("records: bytes expected")
    return m.records


def _pull_release(payload: bytes) -> p.Release | None:
    return p.Release(_U64.unpack(payload)[0]) if len(payload) == 8 else None


ENCODERS: dict[type, Callable[[Any], bytes]] = {
    p.Open: _push_open, p.Seal: _push_seal, p.Opened: _push_opened,
    p.Sealed: _push_sealed, p.Release: lambda m: _U64.pack(m.handle_id),
}
"""Message class -> fast encoder of its payload."""

DECODERS: dict[int, Callable[[bytes], Any]] = {
    p.FrameType.OPEN: _pull_open, p.FrameType.SEAL: _pull_seal, p.FrameType.OPENED: _pull_opened,
    p.FrameType.SEALED: lambda payload: p.Sealed(payload), p.FrameType.RELEASE: _pull_release,
}
"""Frame type -> fast decoder of its payload (``None``: let the reference decide)."""
