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

Explicit CBC IVs: unpredictable, yet reproducible from exported state
---------------------------------------------------------------------
TLS 1.1 and 1.2 put a fresh IV in front of every CBC record (RFC 5246
§6.2.3.2): it "SHOULD be chosen at random, and MUST be unpredictable".  The
requirement is unpredictability to whoever chooses plaintexts -- the attack
it stops is the one on TLS 1.0's chained IVs (BEAST, 2011), where an
attacker who knows the next IV before the plaintext is encrypted can test a
guess of an earlier block.  Nothing in the protocol needs the IV to be
*random*: the receiver reads it off the wire.  RFC 4346 §6.2.3.2 (TLS 1.1)
already described ways to fill the IV field other than drawing it straight
from a strong RNG (a block masked with the previous record's CBC residue),
and NIST SP 800-38A (Appendix C) names the standard one: encrypt a nonce with
the block cipher under a secret key.

This record layer does exactly that.  For a CBC suite each direction's keys
carry a 16-byte ``iv_key`` k' (:attr:`DirectionKeys.iv_key`), and the record
with sequence number ``seq`` gets::

    IV = AES-128-ECB_k'(seq as a 16-byte big-endian integer)

k' comes from the master secret through the TLS PRF with a label of our own
(:data:`IV_KEY_LABEL`, see :meth:`tls12.keyschedule.KeySchedule._derive_keys`).
Only the sender uses it -- the peer just reads the IV -- so no peer has to
know the label, and real peers (OpenSSL, Python's ``ssl``) accept the records.

*Why this is unpredictable to an outsider.*  AES under a secret key is a
pseudorandom permutation: without k' the IV of any sequence number not yet
used is indistinguishable from random, however many earlier (seq, IV) pairs
one has seen on the wire.  k' is a PRF output of the master secret under a
label no other key uses, so it is independent of everything else derived
from it: the key block (MAC keys, encryption keys, the key-block IVs) and
the Finished values.  In particular an SSL-splitting proxy in key-expose mode
(:mod:`sslsplit`) receives the server-write *encryption key and key-block
IV* and the per-record MACs -- never the master secret, the MAC key or k' --
so it cannot predict the server's IVs either.  (It can decrypt the
server-write direction with the exposed key anyway; the point is that the
exposure leaks nothing more.)

*Why it is safe to be deterministic.*  An IV repeats only if the same key
seals two records under one sequence number.  A connection never does; a
mirror that continues an exported connection re-seals the *same* plaintext
at that sequence number, which yields the same bytes -- that is the point:
two imports of one exported state, and the original, seal a plaintext into
byte-identical records, so a backup can resend the tail of a half-
acknowledged record (SSLACC).  Sealing a *different* plaintext under a
sequence number the peer may have seen would reuse the IV with a different
message (revealing whether the two share leading blocks), so a mirror that
rewinds the write sequence number (:meth:`tls12.connection.Connection.import_progress`)
must re-seal the very plaintext the original sealed there -- the reason
SSLACC clusters record sizes before writing them (§5.6).

The IVs of the C extension and of its Python twin are the same bytes,
because both take the explicit IV as an argument; they are computed here, in
Python, once per record (one ECB call per :meth:`WriteProtection.seal_many`
batch).  Keys without ``iv_key`` (AEAD and NULL suites need none; keys
built by hand may lack it) fall back to the injected RNG.

Random IVs and OpenSSL's multi-block seal (``random_ivs``)
----------------------------------------------------------
OpenSSL's stitched AES-CBC-HMAC-SHA1/SHA256 ciphers can seal 4 or 8 full records in
one interleaved pass (AVX2, ~1.5x the one-record throughput; what Python's ``ssl`` gets
on 256 KiB writes), but that pass draws the explicit IVs itself, from OpenSSL's RNG:
they can be neither k'-derived nor injected.  So it is opt-in:
``ServerConfig(random_ivs=True)`` (or ``ClientConfig``), accepted only with the system
``rng``, builds each epoch's :class:`WriteProtection` with ``random_ivs=True``.  Then
every IV is random -- from ``rng`` for records sealed one at a time, from OpenSSL's RNG
(the Python twin: ``os.urandom``) for bulk application data, which
:meth:`WriteProtection.seal_many` hands to ``RecordCipher.seal_stream`` in one call.
Unpredictability is the RFC's own construction; the records have the same sizes and
layout (2^14-byte fragments, the last shorter); what is given up is reproducibility:
a mirror re-sealing such a connection's records from exported state (SSLACC) would not
produce the same bytes, so it must not serve one.  Imported state
(:mod:`tls12.state`) always seals with k'.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal, overload

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

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
    "split_records",
    "IV_KEY_LABEL",
]

IV_KEY_LABEL = b"websec-testbed explicit iv key"
"""The PRF label that derives the per-direction IV keys k' from the master secret.

Not a TLS label: only the sender uses k', so the peer never needs it."""

MAX_PLAINTEXT = 1 << 14
MAX_CIPHERTEXT = (1 << 14) + 2048
_MAX_SEQ = (1 << 64) - 1
_TLS1_1 = 0x0302  # the first version with explicit IVs, which seal_stream draws


class ContentType(IntEnum):
    CHANGE_CIPHER_SPEC = 20
    ALERT = 21
    HANDSHAKE = 22
    APPLICATION_DATA = 23


def record_header(content_type: int, version: int, length: int) -> bytes:
    return bytes((content_type, version >> 8, version & 0xFF)) + length.to_bytes(2, "big")


@overload
def split_records(data: bytes | bytearray, *, partial: Literal[True]) -> list[int]: ...


@overload
def split_records(data: bytes | bytearray, *, partial: bool = False) -> list[int] | None: ...


def split_records(data: bytes | bytearray, *, partial: bool = False) -> list[int] | None:
    """End offsets
 of the whole records at the front of ``data`` (5-byte header + fragment).

    The record framing of §6.2.1, in one place for everyone who must cut a stream
    into records without opening them (a store-and-forward relay, :mod:`tls12.trace`,
    :meth:`tls12.connection.Connection.data_to_send_records`).  ``partial=True``: a
    trailing incomplete record is simply left out.  ``partial=False``: ``None``
    unless ``data`` is exactly whole records of the four known content types.
    """
    ends: list[int] = []
    pos, size = 0, len(data)
    while size - pos >= 5:
        if not partial and data[pos] not in _CONTENT_TYPES:
            return None
        end = pos + 5 + ((data[pos + 3] << 8) | data[pos + 4])
        if end > size:
            break
        ends.append(end)
        pos = end
    if not partial and pos != size:
        return None
    return ends


@dataclass(frozen=True)
class DirectionKeys:
    """The keys of one direction (client-write or server-write) for one suite."""

    params: SuiteParams
    enc_key: bytes
    mac_key: bytes
    iv: bytes
    """The key-block IV (RFC 5246 §6.3); unused by TLS 1.2 CBC records, exposed by sslsplit."""
    iv_key: bytes = b""
    """k': the secret that makes explicit CBC IVs (module docstring); ``b""``: IVs from the RNG."""

    def __post_init__(self) -> None:
        if self.iv_key and len(self.iv_key) != 16:
            raise ValueError(f"iv_key must be 16 bytes, not {len(self.iv_key)}")

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

    def __init__(
        self,
        keys: DirectionKeys | None,
        rng: Callable[[int], bytes],
        seq: int = 0,
        *,
        random_ivs: bool = False,
    ) -> None:
        self.keys = keys
        self.seq = seq
        self._rng = rng
        self._cipher = keys.cipher() if keys is not None else None
        self._block = bool(keys is not None and keys.params.block_size)
        self.random_ivs = random_ivs and self._block
        """Random explicit IVs and bulk writes through ``seal_stream`` (module docstring)."""
        # ECB is stateless, so one encryptor context serves every record of the epoch
        self._iv_ecb = (
            Cipher(algorithms.AES(keys.iv_key), modes.ECB()).encryptor()
            if self._block and keys is not None and keys.iv_key and not self.random_ivs
            else None
        )

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

    def _iv(self, seq: int) -> bytes:
        """The explicit CBC IV of record ``seq`` (module docstring); ``b""`` for AEAD and NULL."""
        if not self._block:
            return b""
        if self._iv_ecb is None:
            return self._rng(16)
        return self._iv_ecb.update(seq.to_bytes(16, "big"))

    def _ivs(self, first_seq: int, count: int) -> list[bytes]:
        """The IVs of records ``first_seq`` .. ``first_seq + count - 1``, in one ECB call."""
        if self._iv_ecb is None:
            return [self._iv(first_seq + i) for i in range(count)]
        blocks = self._iv_ecb.update(
            b"".join((first_seq + i).to_bytes(16, "big") for i in range(count))
        )
        return [blocks[i : i + 16] for i in range(0, 16 * count, 16)]

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
                record.seq, record.content_type, record.version, record.plaintext, self._iv(record.seq)
            )
        return record_header(record.content_type, record.version, len(body)) + body

    def seal_with_mac(self, record: OutgoingRecord, mac: bytes) -> bytes:
        """Protect ``record`` with a MAC computed elsewhere (what a splitting proxy does)."""
        if self._cipher is None:
            body = record.plaintext
        else:
            body = self._cipher.seal_with_mac(record.plaintext, mac, self._iv(record.seq))
        return record_header(record.content_type, record.version, len(body)) + body

    def seal_many(self, records: list[OutgoingRecord]) -> bytes:
        """Seal consecutive records of one content type in one call into the extension.

        With :attr:`random_ivs`, records cut as :meth:`Connection.send_data` cuts data (full
        2^14-byte records, the last one shorter) are sealed by ``seal_stream``: OpenSSL's
        multi-block pass for runs of 4 or 8 full records, same record sizes, random IVs."""
        if self._cipher is None or len(records) < 2:
            return b"".join(self.seal(r) for r in records)
        first = records[0]
        if (
            self.random_ivs
            and first.version >= _TLS1_1
            and records[-1].plaintext
            and all(len(r.plaintext) == MAX_PLAINTEXT for r in records[:-1])
        ):
            data = b"".join(r.plaintext for r in records)
            return self._cipher.seal_stream(first.seq, first.content_type, first.version, data)  # type: ignore[union-attr]  # random_ivs implies a CBC RecordCipher
        ivs = self._ivs(first.seq, len(records))
        bodies = self._cipher.seal_many(
            first.seq, first.content_type, first.version, [r.plaintext for r in records], ivs
        )
        # one copy of each body: header and body go into the join side by side
        type_version = record_header(first.content_type, first.version, 0)[:3]
        return b"".join([part for b in bodies for part in (type_version + len(b).to_bytes(2, "big"), b)])

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

    def set_cipher(self, cipher: object, seq: int = 0) -> None:
        """Open records with ``cipher`` (an object with ``open(seq, type, version, fragment)``
        that raises ValueError on any failure) whose keys this reader never sees: the read side
        of a delegated connection (:class:`tls12.delegate.DelegatedReadCipher`)."""
        self.keys = None
        self._cipher = cipher  # type: ignore[assignment]  # a duck-typed opener (DelegatedReadCipher), not a RecordCipher
        self.seq = seq

    @property
    def cipher(self) -> object | None:
        """What opens records now (``None`` before the peer's ChangeCipherSpec)."""
        return self._cipher

    def peek_fragments(self, content_type: int, version: int, limit: int) -> list[bytes]:
        """The fragments of the whole records of ``content_type`` and ``version`` at the front
        of the buffer (at most ``limit``), left in place: what a batching cipher opens ahead."""
        buf = self._buffer
        out: list[bytes] = []
        pos = 0
        while len(out) < limit and len(buf) - pos >= 5 and buf[pos] == content_type:
            if ((buf[pos + 1] << 8) | buf[pos + 2]) != version:
                break
            length = (buf[pos + 3] << 8) | buf[pos + 4]
            end = pos + 5 + length
            if length > MAX_CIPHERTEXT or end > len(buf):
                break
            out.append(bytes(buf[pos + 5 : end]))
            pos = end
        return out

    def peek_records(self, limit: int) -> list[tuple[int, int, bytes]]:
        """``(content_type, version, fragment)`` of the whole records at the front of the
        buffer (at most ``limit``), left in place: what a server looks at to hand a client's
        whole flight to its delegate at once (:class:`tls12.delegate.FlightDelegate`)."""
        buf = self._buffer
        out: list[tuple[int, int, bytes]] = []
        pos = 0
        while len(out) < limit and len(buf) - pos >= 5:
            length = (buf[pos + 3] << 8) | buf[pos + 4]
            end = pos + 5 + length
            if length > MAX_CIPHERTEXT or end > len(buf):
                break
            out.append((buf[pos], (buf[pos + 1] << 8) | buf[pos + 2], bytes(buf[pos + 5 : end])))
            pos = end
        return out

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def pending(self) -> bytes:
        """Bytes received but not yet consumed (part of exported state)."""
        return bytes(self._buffer)

    @property
    def encrypted(self) -> bool:
        """Whether records are opened with keys now (after the peer's ChangeCipherSpec)."""
        return self._cipher is not None

    @property
    def buffered(self) -> int:
        """How many bytes :attr:`pending` holds, without copying them."""
        return len(self._buffer)

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
