"""The splitting server's record writer: every outgoing record becomes a stub (paper §4.1).

This plugs into seam 2 of :mod:`tls12.record`.  For each record the TLS core
would have sent, the writer emits a *stub* carrying the record's MAC
(computed without encrypting anything) and an id of its payload:

* payloads tagged **cacheable** get a *digest* id and are *published* to the
  server's :class:`~sslsplit.store.RecordStore` -- application-data records
  that carry no HTTP header, and the server's Certificate message (§3.5);
* all other payloads (handshake messages, alerts, HTTP response heads, and
  payloads shorter than their digest) use the *literal* encoding.

Before ChangeCipherSpec records carry no MAC, and a plaintext handshake
record may be cut at message boundaries into several stubs so that the
Certificate message travels alone (and is cached).  Right after the server's
ChangeCipherSpec the writer sends a **key-expose** message with the
server-write encryption key and IV (empty for NULL suites), unless key
exposure is disabled -- then encrypted records are sent whole (verbatim) and
nothing is saved, but nothing breaks either.  The same happens with AEAD
suites (AES-GCM), whose tag covers the ciphertext: they cannot be split at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from tls12.buffer import Buffer
from tls12.messages import HandshakeType
from tls12.record import ContentType, OutgoingRecord, RecordWriter, WriteProtection
from tls12.suites import SUITES, CipherSuite

from .store import RecordStore
from .wire import IDEncoding, KeyExpose, Stub, Verbatim, payload_id, push_message

__all__ = ["SplittingRecordWriter", "WriterStats", "is_http_head", "MODES", "NULL_SUITES",
           "ENCRYPTING_SUITES", "suites_for_mode"]

NULL_SUITES = tuple(s for s, p in SUITES.items() if p.cipher == "null")
ENCRYPTING_SUITES = (
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256,
    CipherSuite.TLS_RSA_WITH_AES_256_CBC_SHA,
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
)
MODES = ("auto", "null", "key-expose")
"""The server's splitting modes: NULL suites only, key exposure (CBC suites) or both."""


def suites_for_mode(mode: str) -> tuple[CipherSuite, ...]:
    """The cipher suites a server in ``mode`` offers: NULL suites need no key exposure,
    CBC suites can be split once the key is exposed; AEAD suites never can (module docstring)."""
    if mode == "null":
        return NULL_SUITES
    if mode == "key-expose":
        return ENCRYPTING_SUITES
    if mode == "auto":
        return NULL_SUITES + ENCRYPTING_SUITES
    raise ValueError(f"mode must be one of {MODES}, not {mode!r}")


def is_http_head(payload: bytes) -> bool:
    """Does this application-data payload start an HTTP response head (dynamic, not cacheable)?"""
    return payload.startswith(b"HTTP/")


@dataclass
class WriterStats:
    records: int = 0
    literal_stubs: int = 0
    digest_stubs: int = 0
    verbatim: int = 0
    payload_bytes: int = 0
    digest_payload_bytes: int = 0
    key_exposed: bool = False


class SplittingRecordWriter(RecordWriter):
    """Seam-2 writer of an SSL-splitting server connection (one instance per connection)."""

    def __init__(
        self,
        store: RecordStore | None,
        encoding: IDEncoding = IDEncoding.DIGEST_SHA256,
        *,
        expose_keys: bool = True,
        cache_certificate: bool = True,
    ) -> None:
        if encoding is IDEncoding.LITERAL:
            raise ValueError("the cacheable-payload encoding must be a digest")
        self.store = store
        self.encoding = encoding
        self.expose_keys = expose_keys
        self.cache_certificate = cache_certificate
        self.stats = WriterStats()
        self._expose_pending = False

    def release(self) -> None:
        """The connection ended: unpin its payloads in the store."""
        if self.store is not None:
            self.store.release(self)

    def _stub(self, record: OutgoingRecord, payload: bytes, mac: bytes, cacheable: bool) -> bytes:
        self.stats.payload_bytes += len(payload)
        ident = payload_id(self.encoding, payload) if cacheable else payload
        if cacheable and len(ident) < len(payload):
            if self.store is not None:
                self.store.publish(ident, payload, self)
            self.stats.digest_stubs += 1
            self.stats.digest_payload_bytes += len(payload)
            return push_message(Stub(record.content_type, record.version, self.encoding, ident, mac))
        self.stats.literal_stubs += 1
        return push_message(Stub(record.content_type, record.version, IDEncoding.LITERAL, payload, mac))

    def _plaintext_handshake(self, record: OutgoingRecord) -> bytes:
        """Cut a plaintext handshake record at message boundaries; the Certificate gets a digest."""
        data = record.plaintext
        pieces: list[tuple[bytes, bool]] = []
        buf = Buffer(data)
        whole_messages = True
        while buf.remaining >= 4:  # a handshake header: uint8 type, uint24 length
            start = len(data) - buf.remaining
            msg_type, length = buf.pull_uint8(), buf.pull_uint24()
            if length > buf.remaining:
                whole_messages = False
                break
            message = data[start : start + 4] + buf.pull_bytes(length)
            cacheable = self.cache_certificate and msg_type == HandshakeType.CERTIFICATE
            if not cacheable and pieces and not pieces[-1][1]:
                pieces[-1] = (pieces[-1][0] + message, False)
            else:
                pieces.append((message, cacheable))
        if not (whole_messages and buf.eof()):  # a message continues in the next record:
            pieces = [(data, False)]               # keep this record whole
        return b"".join(self._stub(record, p, b"", c) for p, c in pieces)

    def write_records(self, records: list[OutgoingRecord], protection: WriteProtection) -> bytes:
        out = bytearray()
        params = protection.params
        # Records can be split unless they are encrypted and the key may not be exposed, or the
        # suite is AEAD (its tag covers the ciphertext and cannot travel apart from it).
        splittable = params is None or (not params.aead and (params.cipher == "null" or self.expose_keys))
        if self._expose_pending:
            self._expose_pending = False
            if splittable:
                out += push_message(KeyExpose(records[0].version if records else 0x0303, protection.enc_key, protection.iv))
                self.stats.key_exposed = bool(protection.enc_key)
        for record in records:
            self.stats.records += 1
            if not splittable:
                self.stats.verbatim += 1
                sealed = protection.seal(record)
                out += push_message(Verbatim(sealed[0], record.version, sealed[5:]))
                continue
            if record.content_type == ContentType.HANDSHAKE and not protection.encrypted:
                out += self._plaintext_handshake(record)
            else:
                mac = protection.compute_mac(record)
                cacheable = (
                    record.content_type == ContentType.APPLICATION_DATA and not is_http_head(record.plaintext)
                )
                out += self._stub(record, record.plaintext, mac, cacheable)
            if record.content_type == ContentType.CHANGE_CIPHER_SPEC:
                self._expose_pending = True
        return bytes(out)
