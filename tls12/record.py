"""The TLS 1.2 record layer (RFC 5246 §6): framing, limits, protection, and the record-writer seam.

Incoming bytes are cut into records by :class:`RecordReader`, which enforces
the limits of §6.2 (ciphertext at most 2^14 + 2048 bytes, plaintext at most
2^14) and opens protected records with the current read state.  Outgoing
records pass through a :class:`RecordWriter` -- **seam 2** of the core:

* the default writer seals every record normally (MAC-then-encrypt);
* SSL splitting replaces it with a writer that emits *stubs* (payload id +
  MAC) instead of records, using :meth:`WriteProtection.compute_mac` -- the
  MAC of a record can be computed without encrypting it -- and exposes the
  server-write key and IV (:attr:`WriteProtection.enc_key`,
  :attr:`WriteProtection.iv`) to a proxy that encrypts for it.

A writer sees each record's content type, sequence number and plaintext
(:class:`OutgoingRecord`) in order and returns the bytes to put on the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from .aead import AEADRecordCipher
from .errors import BadRecordMAC, ProtocolVersionError, RecordOverflow, UnexpectedMessage
from .recordcrypto import RecordCipher
from .suites import SuiteParams

__all__ = [
    "ContentType",
    "MAX_PLAINTEXT",
    "MAX_CIPHERTEXT",
    "DirectionKeys",
    "OutgoingRecord",
    "WriteProtection",
    "RecordWriter",
    "RecordReader",
    "record_header",
]

MAX_PLAINTEXT = 1 << 14
MAX_CIPHERTEXT = (1 << 14) + 2048
_MAX_SEQ = (1 << 64) - 1


class ContentType(IntEnum):
    CHANGE_CIPHER_SPEC = 20
    ALERT = 21
    HANDSHAKE = 22
    APPLICATION_DATA = 23


def record_header(content_type: int, version: int, length: int) -> bytes:
    return bytes((content_type, version >> 8, version & 0xFF)) + length.to_bytes(2, "big")


@dataclass(frozen=True)
class DirectionKeys:
    """The keys of one direction (client-write or server-write) for one suite."""

    params: SuiteParams
    enc_key: bytes
    mac_key: bytes
    iv: bytes

    def cipher(self) -> RecordCipher | AEADRecordCipher:
        if self.params.aead:
            return AEADRecordCipher(self.params.cipher, self.enc_key, self.iv)
        return RecordCipher(self.params.cipher, self.params.mac, self.enc_key, self.mac_key)


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """One record about to be written: what a record writer sees."""

    content_type: int
    version: int
    seq: int
    plaintext: bytes


class WriteProtection:
    """The current write epoch: NULL-NULL before ChangeCipherSpec, the suite's keys after."""

    def __init__(self, keys: DirectionKeys | None, rng: Callable[[int], bytes], seq: int = 0) -> None:
        self.keys = keys
        self.seq = seq
        self._rng = rng
        self._cipher = keys.cipher() if keys is not None else None

    @property
    def encrypted(self) -> bool:
        return self.keys is not None

    @property
    def params(self) -> SuiteParams | None:
        return self.keys.params if self.keys else None

    @property
    def enc_key(self) -> bytes:
        """The write-direction encryption key (what a key-expose message carries; never the MAC key)."""
        return self.keys.enc_key if self.keys else b""

    @property
    def iv(self) -> bytes:
        return self.keys.iv if self.keys else b""

    def _iv(self) -> bytes:
        """A fresh explicit CBC IV from the injected RNG (AEAD suites use the sequence number)."""
        assert self.keys is not None
        return self._rng(16) if self.keys.params.block_size else b""

    def compute_mac(self, record: OutgoingRecord) -> bytes:
        """The record's MAC, computed without encrypting it."""
        if self._cipher is None:
            return b""
        return self._cipher.compute_mac(record.seq, record.content_type, record.version, record.plaintext)

    def seal(self, record: OutgoingRecord) -> bytes:
        """The whole protected record, header included."""
        if self._cipher is None:
            body = record.plaintext
        else:
            body = self._cipher.seal(
                record.seq, record.content_type, record.version, record.plaintext, self._iv()
            )
        return record_header(record.content_type, record.version, len(body)) + body

    def seal_with_mac(self, record: OutgoingRecord, mac: bytes) -> bytes:
        """Protect ``record`` with a MAC computed elsewhere (what a splitting proxy does)."""
        if self._cipher is None:
            body = record.plaintext
        else:
            body = self._cipher.seal_with_mac(record.plaintext, mac, self._iv())
        return record_header(record.content_type, record.version, len(body)) + body

    def seal_many(self, records: list[OutgoingRecord]) -> bytes:
        """Seal consecutive records of one content type in one call into the extension."""
        if self._cipher is None or len(records) < 2:
            return b"".join(self.seal(r) for r in records)
        first = records[0]
        ivs = [self._iv() for _ in records]
        bodies = self._cipher.seal_many(
            first.seq, first.content_type, first.version, [r.plaintext for r in records], ivs
        )
        return b"".join(
            record_header(first.content_type, first.version, len(b)) + b for b in bodies
        )

    def next_seq(self) -> int:
        seq = self.seq
        if seq > _MAX_SEQ:
            raise RecordOverflow("sequence number would wrap")
        self.seq += 1
        return seq


class RecordWriter:
    """Seam 2: turns outgoing records into wire bytes.  The default seals them.

    Override :meth:`write_records` to change what goes on the wire.  The
    records of one call share a content type and have consecutive sequence
    numbers.
    """

    def write_records(self, records: list[OutgoingRecord], protection: WriteProtection) -> bytes:
        if records and all(r.content_type == records[0].content_type for r in records):
            return protection.seal_many(records)
        return b"".join(protection.seal(r) for r in records)


class RecordReader:
    """Cuts incoming bytes into records and opens them; buffers at most one partial record."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.keys: DirectionKeys | None = None
        self._cipher: RecordCipher | AEADRecordCipher | None = None
        self.seq = 0
        self.version: int | None = None  # once negotiated, every record must carry it

    def set_keys(self, keys: DirectionKeys | None, seq: int = 0) -> None:
        self.keys = keys
        self._cipher = keys.cipher() if keys is not None else None
        self.seq = seq

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def pending(self) -> bytes:
        """Bytes received but not yet consumed (part of exported state)."""
        return bytes(self._buffer)

    def next_record(self) -> tuple[int, bytes] | None:
        """The next (content type, plaintext), or None if no whole record is buffered."""
        buf = self._buffer
        if len(buf) < 5:
            if buf and buf[0] not in _CONTENT_TYPES:
                raise UnexpectedMessage(f"unknown record content type {buf[0]}")
            return None
        content_type = buf[0]
        version = (buf[1] << 8) | buf[2]
        length = (buf[3] << 8) | buf[4]
        if content_type not in _CONTENT_TYPES:
            raise UnexpectedMessage(f"unknown record content type {content_type}")
        if buf[1] != 3 or (self.version is not None and version != self.version):
            raise ProtocolVersionError(f"record version 0x{version:04x}")
        if length > MAX_CIPHERTEXT:
            raise RecordOverflow(f"record of {length} bytes exceeds 2^14 + 2048")
        if len(buf) < 5 + length:
            return None
        fragment = bytes(buf[5 : 5 + length])
        del buf[: 5 + length]
        if self._cipher is None:
            plaintext = fragment
        else:
            if self.seq > _MAX_SEQ:
                raise RecordOverflow("sequence number would wrap")
            try:
                plaintext = self._cipher.open(self.seq, content_type, version, fragment)
            except ValueError:
                raise BadRecordMAC("bad record MAC") from None
            self.seq += 1
        if len(plaintext) > MAX_PLAINTEXT:
            raise RecordOverflow(f"plaintext of {len(plaintext)} bytes exceeds 2^14")
        return content_type, plaintext


_CONTENT_TYPES = frozenset(int(c) for c in ContentType)
