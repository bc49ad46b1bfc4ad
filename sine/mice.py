"""MICE: the ``mi-sha256-03`` content coding of draft-thomson-http-mice-03 (sans-IO).

MICE is SINE's hash chain in HTTP clothing (the paper's §2 lineage): the content is cut into
records ``r_1..r_n`` of ``rs`` bytes (the last one 1..rs bytes, *not* padded) and the proofs are
computed backwards, from the end::

    proof(r_n) = SHA-256(r_n || 0x00)
    proof(r_i) = SHA-256(r_i || proof(r_{i+1}) || 0x01)          i = n-1 .. 1

The encoded body is ``rs (8 bytes, big-endian) || r_1 || proof(r_2) || r_2 || ... || r_n``
(draft §2.1); an empty content encodes to an empty body whose top proof is ``SHA-256(0x00)``.
The top proof ``proof(r_1)`` travels outside the body, as ``Digest: mi-sha256-03=<base64>``
(draft §3, RFC 3230 syntax) -- the field a signature must cover.  A signed exchange (SXG,
draft-yasskin-http-origin-signed-responses, format ``b3``) carries exactly these two fields,
``content-encoding: mi-sha256-03`` and ``digest: mi-sha256-03=...``, in its signed CBOR map of
response headers (its ``Signature`` names them with ``integrity="digest/mi-sha256-03"``) and the
encoded body as its payload; :func:`response_fields` gives both.

Differences from SINE version 1 (``FORMAT.md``): the link follows the block inside the hashed
record (SINE: ``H(B_i || h_{i+1})``, MICE appends a one-byte "more records" flag), the last
record is not padded (its length is what the stream says; SINE signs ``L``), and the root is
not signed here at all -- :mod:`sine.httpsig` signs the ``Digest`` field.

Record sizes are limited to 1024..16384 bytes by default (the draft sets no bound; SXG tools
use 4096 or 16384), so a peer cannot make the decoder buffer more than 16 KiB; the draft's own
examples use 16 and 41 and are decoded with ``record_sizes=range(1, MAX_RECORD_SIZE + 1)``.

:class:`MiceDecoder` is fed bytes and releases a record only after its proof checked; the first
bad record raises :class:`~sine.errors.MiceIntegrityError` naming it (0 = the record-size header
or the top proof, ``i`` = record ``r_i``), after which the decoder is closed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from enum import Enum, auto
from typing import NoReturn

from .errors import LocalProtocolError, MiceIntegrityError

__all__ = [
    "CONTENT_CODING",
    "PROOF_SIZE",
    "MIN_RECORD_SIZE",
    "MAX_RECORD_SIZE",
    "RECORD_SIZES",
    "EMPTY_PROOF",
    "MiceEncoding",
    "mice_proofs",
    "mice_encode",
    "encoded_length",
    "push_record_size",
    "pull_record_size",
    "push_digest",
    "pull_digest",
    "response_fields",
    "MiceEvent",
    "RecordVerified",
    "ContentVerified",
    "MiceState",
    "MiceDecoder",
    "mice_decode",
]

#: the content coding and the digest algorithm share this name (draft §2 and §3)
CONTENT_CODING = "mi-sha256-03"
PROOF_SIZE = 32
HEADER_SIZE = 8
MIN_RECORD_SIZE = 1024
MAX_RECORD_SIZE = 16384
RECORD_SIZES = range(MIN_RECORD_SIZE, MAX_RECORD_SIZE + 1)
#: the top proof of the empty content, ``SHA-256(0x00)`` (draft §2.2)
EMPTY_PROOF = hashlib.sha256(b"\x00").digest()


def _check_sizes(record_sizes: range) -> None:
    if record_sizes.step != 1 or record_sizes.start < 1 or len(record_sizes) == 0:
        raise ValueError("record_sizes must be a non-empty range of positive sizes, step 1")


@dataclass(frozen=True)
class MiceEncoding:
    """An encoded body and its top proof (what goes into ``Digest``)."""

    top_proof: bytes
    body: bytes
    record_size: int

    def digest_field(self) -> str:
        """The ``Digest`` field value, ``mi-sha256-03=<base64>``."""
        return push_digest(self.top_proof)


def mice_proofs(content: bytes, record_size: int) -> list[bytes]:
    """``[proof(r_1), ..., proof(r_n)]``, computed from the end; ``[]`` for empty content."""
    if record_size < 1:
        raise ValueError("record size must be positive")
    n = -(-len(content) // record_size)
    proofs = [b""] * n
    view = memoryview(content)
    nxt = b""
    for i in range(n - 1, -1, -1):
        h = hashlib.sha256(view[i * record_size : (i + 1) * record_size])
        h.update(nxt + b"\x01" if nxt else b"\x00")
        nxt = proofs[i] = h.digest()
    return proofs


def mice_encode(
    content: bytes, record_size: int = MAX_RECORD_SIZE, *, record_sizes: range = RECORD_SIZES
) -> MiceEncoding:
    """Encode ``content`` with ``mi-sha256-03``; a record size outside ``record_sizes`` is a
    :class:`ValueError` (the caller's mistake)."""
    _check_sizes(record_sizes)
    if record_size not in record_sizes:
        raise ValueError(f"record size {record_size} outside {record_sizes.start}.."
                         f"{record_sizes.stop - 1}")
    if not content:
        return MiceEncoding(EMPTY_PROOF, b"", record_size)
    proofs = mice_proofs(content, record_size)
    out = bytearray(push_record_size(record_size))
    for i in range(len(proofs)):
        if i:
            out += proofs[i]
        out += content[i * record_size : (i + 1) * record_size]
    return MiceEncoding(proofs[0], bytes(out), record_size)


def encoded_length(content_length: int, record_size: int) -> int:
    """Bytes of the encoded body: ``8 + L + 32 * (ceil(L / rs) - 1)``, 0 when ``L = 0``."""
    if content_length == 0:
        return 0
    n = -(-content_length // record_size)
    return HEADER_SIZE + content_length + PROOF_SIZE * (n - 1)


def push_record_size(record_size: int) -> bytes:
    """The 8-byte big-endian record-size header."""
    return record_size.to_bytes(HEADER_SIZE, "big")


def pull_record_size(header: bytes, record_sizes: range = RECORD_SIZES) -> int:
    """Parse the record-size header (exactly 8 bytes); out-of-range sizes fail at record 0."""
    if len(header) != HEADER_SIZE:
        raise MiceIntegrityError(f"record-size header has {len(header)} bytes, not 8", 0)
    rs = int.from_bytes(header, "big")
    if rs not in record_sizes:
        raise MiceIntegrityError(f"record size {rs} outside {record_sizes.start}.."
                                 f"{record_sizes.stop - 1}", 0)
    return rs


def push_digest(top_proof: bytes) -> str:
    """``mi-sha256-03=<base64 of the 32-byte top proof>``."""
    if len(top_proof) != PROOF_SIZE:
        raise ValueError("a top proof has 32 bytes")
    return f"{CONTENT_CODING}={base64.b64encode(top_proof).decode('ascii')}"


def _strict_b64(text: str) -> bytes:
    """Canonical base64 only: the standard alphabet, padding, zero padding bits (draft §3)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise MiceIntegrityError("mi-sha256-03 value is not base64", 0) from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise MiceIntegrityError("mi-sha256-03 value is not canonical base64", 0)
    if len(raw) != PROOF_SIZE:
        raise MiceIntegrityError(f"mi-sha256-03 value has {len(raw)} bytes, not 32", 0)
    return raw


def pull_digest(value: str) -> bytes:
    """The top proof from a ``Digest`` field value (RFC 3230: ``alg=value`` members separated by
    commas, algorithm names case-insensitive).  Other algorithms are ignored; no member, a bad
    value, or two different ``mi-sha256-03`` values fail at record 0."""
    proofs = set()
    for member in value.split(","):
        name, sep, encoded = member.strip(" \t").partition("=")
        if not sep:
            raise MiceIntegrityError(f"Digest member {member.strip()!r} has no '='", 0)
        if name.lower() == CONTENT_CODING:
            proofs.add(_strict_b64(encoded))
    if not proofs:
        raise MiceIntegrityError("no mi-sha256-03 member in Digest", 0)
    if len(proofs) > 1:
        raise MiceIntegrityError("Digest has different mi-sha256-03 values", 0)
    return proofs.pop()


def response_fields(encoding: MiceEncoding) -> list[tuple[str, str]]:
    """``Content-Encoding`` and ``Digest`` for an encoded response (also SXG's signed pair)."""
    return [("Content-Encoding", CONTENT_CODING), ("Digest", encoding.digest_field())]


@dataclass(frozen=True, slots=True)
class MiceEvent:
    """Base class of decoder events."""


@dataclass(frozen=True, slots=True)
class RecordVerified(MiceEvent):
    """Record ``index`` (1-based) checked against its proof; ``data`` is its content."""

    index: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ContentVerified(MiceEvent):
    """The body ended after a valid last record (or was empty under ``EMPTY_PROOF``)."""

    length: int
    records: int


class MiceState(Enum):
    """Where a decoder is: before the record-size header, in the records, done, or closed."""

    HEADER = auto()
    RECORDS = auto()
    DONE = auto()
    CLOSED = auto()


#: states that accept bytes (``receive_data(b"")`` ends the body)
_OPEN = {MiceState.HEADER, MiceState.RECORDS}


class MiceDecoder:
    """Progressive ``mi-sha256-03`` decoder: ``receive_data(chunk)`` -> events, ``b""`` = end.

    Holds at most one record plus its proof and the chunk being fed.  Events completed in a
    call that then fails travel on the exception as ``exc.events``.
    """

    def __init__(self, top_proof: bytes, *, record_sizes: range = RECORD_SIZES) -> None:
        if len(top_proof) != PROOF_SIZE:
            raise ValueError("a top proof has 32 bytes")
        _check_sizes(record_sizes)
        self.record_sizes = record_sizes
        self.state = MiceState.HEADER
        self.record_size = 0
        self._expected = bytes(top_proof)
        self._buf = bytearray()
        self._index = 1  # the record being received
        self._length = 0
        self._events: list[MiceEvent] = []

    def data_to_send(self) -> bytes:
        """Always ``b""``: a decoder sends nothing."""
        return b""

    @property
    def next_record(self) -> int:
        """The 1-based index of the record being received (what an error now would name)."""
        return self._index

    @property
    def buffered(self) -> int:
        """Bytes received but not yet released (at most one record, its proof and a chunk)."""
        return len(self._buf)

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[MiceEvent]:
        """Feed body bytes (``b""`` ends the body); return the events they completed."""
        if self.state not in _OPEN:
            raise LocalProtocolError(f"decoder is {self.state.name}")
        if not data:
            self._finish()
        else:
            self._buf += data
            self._drain()
        events, self._events = self._events, []
        return events

    def _fail(self, message: str, record: int) -> NoReturn:
        self._raise(MiceIntegrityError(message, record))

    def _raise(self, exc: MiceIntegrityError) -> NoReturn:
        self.state = MiceState.CLOSED
        self._buf.clear()
        exc.events.extend(self._events)
        self._events = []
        raise exc

    def _drain(self) -> None:
        if self.state is MiceState.HEADER:
            if len(self._buf) < HEADER_SIZE:
                return
            header = bytes(self._buf[:HEADER_SIZE])
            try:
                self.record_size = pull_record_size(header, self.record_sizes)
            except MiceIntegrityError as exc:
                self._raise(exc)
            del self._buf[:HEADER_SIZE]
            self.state = MiceState.RECORDS
        rs = self.record_size
        while len(self._buf) >= rs + PROOF_SIZE:
            record = bytes(self._buf[:rs])
            proof = bytes(self._buf[rs : rs + PROOF_SIZE])
            self._check(record + proof + b"\x01")
            del self._buf[: rs + PROOF_SIZE]
            self._release(record)
            self._expected = proof

    def _check(self, hashed: bytes) -> None:
        if not hmac.compare_digest(hashlib.sha256(hashed).digest(), self._expected):
            self._fail("proof mismatch", self._index)

    def _release(self, record: bytes) -> None:
        self._events.append(RecordVerified(self._index, record))
        self._length += len(record)
        self._index += 1

    def _finish(self) -> None:
        if self.state is MiceState.HEADER:
            if self._buf:
                self._fail(f"body ended inside the record-size header ({len(self._buf)} bytes)", 0)
            if not hmac.compare_digest(self._expected, EMPTY_PROOF):
                self._fail("empty body, but the top proof is not that of empty content", 1)
        else:
            last = bytes(self._buf)
            if not 1 <= len(last) <= self.record_size:
                self._fail(f"last record has {len(last)} bytes, not 1..{self.record_size}",
                           self._index)
            self._check(last + b"\x00")
            self._buf.clear()
            self._release(last)
        self.state = MiceState.DONE
        self._events.append(ContentVerified(self._length, self._index - 1))


def mice_decode(body: bytes, top_proof: bytes, *, record_sizes: range = RECORD_SIZES) -> bytes:
    """Decode a whole body at once (all-or-nothing convenience over :class:`MiceDecoder`)."""
    decoder = MiceDecoder(top_proof, record_sizes=record_sizes)
    events = (decoder.receive_data(body) if body else []) + decoder.receive_data(b"")
    return b"".join(e.data for e in events if isinstance(e, RecordVerified))
