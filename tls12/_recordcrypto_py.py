"""Pure-Python reference twin of the ``tls12._recordcrypto`` C extension.

Same API, same bytes, same errors as the C ``RecordCipher``; used when the
extension is not built, when ``TLS12_PURE_PYTHON=1``, and by the tests as the
reference the C code is compared against.  AES comes from ``cryptography``
and HMAC from the standard library, so "pure" means "no compiled code of
ours".  See :mod:`tls12.recordcrypto` for the record format and semantics.

Decryption follows the same single-pass structure as the C code (padding and
MAC are both always checked, the MAC is always computed, the result is one
error with one message), but Python makes no constant-time promises: use the
C extension where timing matters.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = ["RecordCipher", "RecordCryptoError", "PLAINTEXT_MAX", "FRAGMENT_MAX"]

PLAINTEXT_MAX = 2**14
FRAGMENT_MAX = 2**14 + 2048
SEQ_MAX = 2**64 - 1
AES_BLOCK = 16
BAD_RECORD = "bad record MAC"

_KEY_LENGTHS = {"null": 0, "aes-128-cbc": 16, "aes-256-cbc": 32}
_DIGESTS: dict[str, tuple[Callable[..., Any], int]] = {
    "sha1": (hashlib.sha1, 20),
    "sha256": (hashlib.sha256, 32),
}


class RecordCryptoError(ValueError):
    """A record failed to decrypt or authenticate (one error for every cause)."""


def _check_bytes(name: str, value: object) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"{name} must be bytes, not {type(value).__name__}")
    return value


def _check_uint(name: str, value: object, maximum: int) -> int:
    if not isinstance(value, int):
        raise TypeError(f"{name} must be an int")
    if not 0 <= value <= maximum:
        raise ValueError(f"{name} must be in 0..{maximum}")
    return value


def _header(
    seq: object, content_type: object, version: object, count: int = 1
) -> tuple[int, bytes]:
    """Validate header fields; return (seq, type||version) for building the MAC input."""
    seq_ = _check_uint("seq", seq, SEQ_MAX)
    if count > 1 and seq_ > SEQ_MAX - (count - 1):
        raise ValueError("sequence number would exceed 2^64-1")
    type_ = _check_uint("content_type", content_type, 0xFF)
    version_ = _check_uint("version", version, 0xFFFF)
    return seq_, bytes((type_, version_ >> 8, version_ & 0xFF))


def _bytes_list(name: str, values: Iterable[bytes]) -> list[bytes]:
    if isinstance(values, (bytes, str)):
        raise TypeError(f"{name} must be a list of bytes")
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{name} must be a list of bytes") from None
    if not all(isinstance(item, bytes) for item in items):
        raise TypeError(f"{name} must contain only bytes")
    return items


class RecordCipher:
    """Protection of one direction of a TLS 1.2 connection (MAC-then-encrypt, RFC 5246 §6.2.3).

    ``stitched`` and ``multiblock`` are accepted for API parity with the C class and
    ignored: the Python twin always runs the generic (separate HMAC and CBC) construction,
    one record at a time.
    """

    __slots__ = ("mac_length", "block_size", "stitched", "multiblock", "_key", "_hmac")

    def __init__(
        self,
        cipher: str,
        mac: str,
        enc_key: bytes,
        mac_key: bytes,
        *,
        stitched: bool = True,
        multiblock: bool = True,
    ) -> None:
        if cipher not in _KEY_LENGTHS:
            raise ValueError(f"unknown cipher {cipher}")
        if mac not in _DIGESTS:
            raise ValueError(f"unknown MAC {mac}")
        digest, mac_length = _DIGESTS[mac]
        key_length = _KEY_LENGTHS[cipher]
        if len(_check_bytes("enc_key", enc_key)) != key_length:
            raise ValueError(f"enc_key must be {key_length} bytes for {cipher}")
        if len(_check_bytes("mac_key", mac_key)) not in (0, mac_length):
            raise ValueError(f"mac_key must be {mac_length} bytes (or empty) for {mac}")
        self.mac_length = mac_length
        self.block_size = 0 if key_length == 0 else AES_BLOCK
        self.stitched = False
        self.multiblock = False
        self._key = enc_key
        self._hmac = hmac.new(mac_key, digestmod=digest) if mac_key else None

    # -- MAC -------------------------------------------------------------------

    def _mac(self, seq: int, type_version: bytes, data: bytes) -> bytes:
        assert self._hmac is not None
        h = self._hmac.copy()
        h.update(seq.to_bytes(8, "big") + type_version + len(data).to_bytes(2, "big"))
        h.update(data)
        return h.digest()

    def _require_mac_key(self) -> None:
        if self._hmac is None:
            raise ValueError("cipher was built without a MAC key: only seal_with_mac is available")

    def compute_mac(self, seq: int, content_type: int, version: int, plaintext: bytes) -> bytes:
        """HMAC(mac_key, seq_num(8) || type(1) || version(2) || length(2) || plaintext)."""
        self._require_mac_key()
        seq_, tv = _header(seq, content_type, version)
        return self._mac(seq_, tv, self._check_plaintext(plaintext))

    # -- seal ------------------------------------------------------------------

    @staticmethod
    def _check_plaintext(plaintext: bytes) -> bytes:
        if len(_check_bytes("plaintext", plaintext)) > PLAINTEXT_MAX:
            raise ValueError("plaintext longer than 2^14 bytes")
        return plaintext

    def _check_iv(self, explicit_iv: bytes) -> bytes:
        if len(_check_bytes("explicit_iv", explicit_iv)) != self.block_size:
            raise ValueError(f"explicit_iv must be {self.block_size} bytes")
        return explicit_iv

    def _encrypt(self, plaintext: bytes, mac: bytes, explicit_iv: bytes) -> bytes:
        body = plaintext + mac
        if not self.block_size:
            return body
        pad = AES_BLOCK - 1 - len(body) % AES_BLOCK  # minimal padding
        encryptor = Cipher(algorithms.AES(self._key), modes.CBC(explicit_iv)).encryptor()
        return (
            explicit_iv + encryptor.update(body + bytes((pad,)) * (pad + 1)) + encryptor.finalize()
        )

    def seal(
        self, seq: int, content_type: int, version: int, plaintext: bytes, explicit_iv: bytes = b""
    ) -> bytes:
        """Return the TLSCiphertext.fragment: ``IV || E(plaintext || MAC || padding)``."""
        self._require_mac_key()
        seq_, tv = _header(seq, content_type, version)
        plaintext = self._check_plaintext(plaintext)
        explicit_iv = self._check_iv(explicit_iv)
        return self._encrypt(plaintext, self._mac(seq_, tv, plaintext), explicit_iv)

    def seal_with_mac(self, plaintext: bytes, mac: bytes, explicit_iv: bytes = b"") -> bytes:
        """Encrypt ``plaintext || mac || padding`` with a MAC computed elsewhere."""
        plaintext = self._check_plaintext(plaintext)
        if len(_check_bytes("mac", mac)) != self.mac_length:
            raise ValueError(f"mac must be {self.mac_length} bytes")
        return self._encrypt(plaintext, mac, self._check_iv(explicit_iv))

    def seal_many(
        self,
        seq: int,
        content_type: int,
        version: int,
        plaintexts: Sequence[bytes],
        explicit_ivs: Sequence[bytes],
    ) -> list[bytes]:
        """Seal records with sequence numbers seq, seq+1, ...; one IV per record."""
        self._require_mac_key()
        items = _bytes_list("plaintexts", plaintexts)
        ivs = _bytes_list("explicit_ivs", explicit_ivs)
        if len(ivs) != len(items):
            raise ValueError("need one explicit IV per plaintext")
        _header(seq, content_type, version, len(items))
        return [
            self.seal(seq + i, content_type, version, p, iv)
            for i, (p, iv) in enumerate(zip(items, ivs, strict=True))
        ]

    def seal_stream(self, seq: int, content_type: int, version: int, data: bytes) -> bytes:
        """Whole wire records (5-byte headers included) of ``data`` cut into 2^14-byte pieces
        (the last shorter; none for ``b""``), numbered from ``seq``, each with a fresh random
        explicit IV.  The C class seals runs of full records in OpenSSL's multi-block pass,
        whose IVs come from OpenSSL's RNG; here each record draws ``os.urandom(16)``, so the
        two agree on everything but the IVs (and hence the ciphertext)."""
        self._require_mac_key()
        _check_bytes("data", data)
        pieces = [data[i : i + PLAINTEXT_MAX] for i in range(0, len(data), PLAINTEXT_MAX)]
        _header(seq, content_type, version, len(pieces))
        if self.block_size and version < 0x0302:
            raise ValueError("seal_stream draws explicit IVs: version must be TLS 1.1 (0x0302) or later")
        head = bytes((content_type, version >> 8, version & 0xFF))
        out = []
        for i, piece in enumerate(pieces):
            body = self.seal(seq + i, content_type, version, piece, os.urandom(self.block_size))
            out.append(head + len(body).to_bytes(2, "big") + body)
        return b"".join(out)

    # -- open ------------------------------------------------------------------

    def open(self, seq: int, content_type: int, version: int, fragment: bytes) -> bytes:
        """Decrypt and authenticate one fragment; any failure is one RecordCryptoError."""
        self._require_mac_key()
        seq_, tv = _header(seq, content_type, version)
        return self._open(seq_, tv, _check_bytes("fragment", fragment))

    def open_many(
        self, seq: int, content_type: int, version: int, fragments: Sequence[bytes]
    ) -> list[bytes]:
        """Open records with sequence numbers seq, seq+1, ...; all-or-nothing."""
        self._require_mac_key()
        items = _bytes_list("fragments", fragments)
        seq_, tv = _header(seq, content_type, version, len(items))
        return [self._open(seq_ + i, tv, f) for i, f in enumerate(items)]

    def _open(self, seq: int, tv: bytes, fragment: bytes) -> bytes:
        n, mac = len(fragment), self.mac_length
        # Public-length checks: the length is on the wire anyway.
        minimum = (
            mac if not self.block_size else AES_BLOCK + (mac + AES_BLOCK) // AES_BLOCK * AES_BLOCK
        )
        if n > FRAGMENT_MAX or n < minimum or n % AES_BLOCK and self.block_size:
            raise RecordCryptoError(BAD_RECORD)
        if not self.block_size:
            expected = self._mac(seq, tv, fragment[: n - mac])
            if not hmac.compare_digest(expected, fragment[n - mac :]):
                raise RecordCryptoError(BAD_RECORD)
            return fragment[: n - mac]

        decryptor = Cipher(algorithms.AES(self._key), modes.CBC(fragment[:AES_BLOCK])).decryptor()
        data = decryptor.update(fragment[AES_BLOCK:]) + decryptor.finalize()
        m = len(data)
        # Padding: pad+1 bytes of value pad, compared in one big-integer operation.
        pad = data[-1]
        good = int(pad <= m - mac - 1)
        window = min(m, 256)
        diff = int.from_bytes(data[m - window :], "big") ^ int.from_bytes(
            bytes((pad,)) * window, "big"
        )
        good &= int(diff & ((1 << (8 * (pad + 1))) - 1) == 0)
        pad *= good  # a bad padding is treated as zero-length, as in OpenSSL
        length = m - mac - 1 - pad
        # Always compute the MAC; hash the padding as dummy work (same byte count).
        expected = self._mac(seq, tv, data[:length])
        dummy = self._hmac.copy()  # type: ignore[union-attr]  # CBC suites only, which always have a MAC key
        dummy.update(data[length : m - mac - 1])
        good &= int(hmac.compare_digest(expected, data[length : length + mac]))
        if not good:
            raise RecordCryptoError(BAD_RECORD)
        return data[:length]
