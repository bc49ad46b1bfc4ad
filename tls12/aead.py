"""AES-GCM record protection (RFC 5288): the AEAD suites, and why they defeat SSL splitting.

An AEAD record is ``nonce_explicit(8) || AES-GCM(key, salt || nonce_explicit,
plaintext, aad)`` with ``aad = seq(8) || type(1) || version(2) || length(2)``
and a 16-byte tag.  The tag is computed over the *ciphertext* by the same
key that encrypts, so -- unlike the MAC of a CBC suite -- it cannot be sent
apart from the payload and attached by a proxy that encrypts on its own:
:meth:`AEADRecordCipher.compute_mac` and :meth:`AEADRecordCipher.seal_with_mac`
raise.  An SSL-splitting server that negotiates a GCM suite can only relay
whole records (see :mod:`sslsplit.writer`), which is the point these suites
make in the testbed.

The class has the interface of :class:`tls12.recordcrypto.RecordCipher`;
the cipher itself is ``cryptography``'s AESGCM (OpenSSL).  The explicit
nonce is the record's sequence number (as OpenSSL does), so no randomness
is needed and outputs are deterministic.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["AEADRecordCipher", "AEADError", "TAG_LENGTH", "EXPLICIT_NONCE_LENGTH"]

TAG_LENGTH = 16
EXPLICIT_NONCE_LENGTH = 8
_MAX_PLAINTEXT = 1 << 14
_MAX_FRAGMENT = (1 << 14) + 2048
_MAX_SEQ = (1 << 64) - 1


class AEADError(ValueError):
    """An AEAD record did not authenticate (or was malformed): one error, one message."""


class AEADRecordCipher:
    """Protection of one direction with AES-GCM (TLS 1.2, RFC 5288)."""

    block_size = 0
    mac_length = 0
    stitched = False

    def __init__(self, cipher: str, enc_key: bytes, salt: bytes) -> None:
        lengths = {"aes-128-gcm": 16, "aes-256-gcm": 32}
        if cipher not in lengths:
            raise ValueError(f"unknown AEAD cipher {cipher!r}")
        if len(enc_key) != lengths[cipher] or len(salt) != 4:
            raise ValueError(f"{cipher} needs a {lengths[cipher]}-byte key and a 4-byte salt")
        self._aead = AESGCM(enc_key)
        self._salt = salt

    @staticmethod
    def _aad(seq: int, content_type: int, version: int, length: int) -> bytes:
        if not 0 <= seq <= _MAX_SEQ:
            raise ValueError("sequence number out of range")
        return seq.to_bytes(8, "big") + bytes((content_type, version >> 8, version & 0xFF)) + length.to_bytes(2, "big")

    def compute_mac(self, seq: int, content_type: int, version: int, plaintext: bytes) -> bytes:
        raise ValueError("an AEAD record has no MAC separable from its ciphertext")

    def seal_with_mac(self, plaintext: bytes, mac: bytes, explicit_iv: bytes = b"") -> bytes:
        raise ValueError("an AEAD record cannot be built from a MAC computed elsewhere")

    def seal(self, seq: int, content_type: int, version: int, plaintext: bytes, explicit_iv: bytes = b"") -> bytes:
        if len(plaintext) > _MAX_PLAINTEXT:
            raise ValueError("plaintext larger than 2^14 bytes")
        nonce_explicit = explicit_iv or seq.to_bytes(8, "big")
        if len(nonce_explicit) != EXPLICIT_NONCE_LENGTH:
            raise ValueError("the explicit nonce is 8 bytes")
        aad = self._aad(seq, content_type, version, len(plaintext))
        return nonce_explicit + self._aead.encrypt(self._salt + nonce_explicit, plaintext, aad)

    def open(self, seq: int, content_type: int, version: int, fragment: bytes) -> bytes:
        if not EXPLICIT_NONCE_LENGTH + TAG_LENGTH <= len(fragment) <= _MAX_FRAGMENT:
            raise AEADError("bad record MAC")
        length = len(fragment) - EXPLICIT_NONCE_LENGTH - TAG_LENGTH
        aad = self._aad(seq, content_type, version, length)
        try:
            return self._aead.decrypt(self._salt + fragment[:8], fragment[8:], aad)
        except InvalidTag:
            raise AEADError("bad record MAC") from None

    def seal_many(self, seq: int, content_type: int, version: int, plaintexts: list[bytes], explicit_ivs: list[bytes]) -> list[bytes]:
        return [self.seal(seq + i, content_type, version, p, iv) for i, (p, iv) in enumerate(zip(plaintexts, explicit_ivs, strict=True))]

    def open_many(self, seq: int, content_type: int, version: int, fragments: list[bytes]) -> list[bytes]:
        return [self.open(seq + i, content_type, version, f) for i, f in enumerate(fragments)]
