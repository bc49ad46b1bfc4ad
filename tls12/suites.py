"""Cipher suites implemented by the core, with their parameters (RFC 5246 App. A.5, RFC 4492).

MAC-then-encrypt suites (NULL and AES-CBC) are what SSL splitting relies on:
the MAC is computed over the plaintext and can be sent apart from it.
``encrypt_then_mac`` (RFC 7366) is deliberately never negotiated: with it the
MAC covers the *ciphertext*, so a server that splits a record could no longer
send a MAC the proxy can attach to a payload it encrypts itself, and
key-expose mode (Barnraising) would break.  The AES-GCM suites (RFC 5288) are
implemented to show exactly that (:mod:`tls12.aead`): they interoperate, but a
splitting server can only relay their records whole.  They are not in
:data:`DEFAULT_SUITES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

__all__ = [
    "CipherSuite",
    "KeyExchange",
    "BulkCipher",
    "MacAlgorithm",
    "SuiteParams",
    "SUITES",
    "DEFAULT_SUITES",
    "suite_by_name",
    "parse_suite_list",
]


class CipherSuite(IntEnum):
    TLS_RSA_WITH_NULL_SHA = 0x0002
    TLS_RSA_WITH_AES_128_CBC_SHA = 0x002F
    TLS_RSA_WITH_AES_256_CBC_SHA = 0x0035
    TLS_RSA_WITH_NULL_SHA256 = 0x003B
    TLS_RSA_WITH_AES_128_CBC_SHA256 = 0x003C
    TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA = 0xC013
    TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256 = 0xC027
    TLS_RSA_WITH_AES_128_GCM_SHA256 = 0x009C
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 = 0xC02F


class KeyExchange(StrEnum):
    """How the premaster secret is agreed (the first half of a suite name)."""

    RSA = "rsa"
    """The client encrypts a random premaster secret to the server's RSA key (RFC 5246 §7.4.7.1)."""
    ECDHE_RSA = "ecdhe_rsa"
    """Ephemeral ECDH, the server's share signed with its RSA key (RFC 4492 §2.4); see :mod:`tls12.ecdhe`."""


class BulkCipher(StrEnum):
    """The record cipher.  The values are the names the record layer's ``RecordCipher`` takes.

    A :class:`enum.StrEnum`: members compare equal to (and format as) their
    values, so ``params.cipher == "null"`` keeps working for callers written
    against the earlier string fields.
    """

    NULL = "null"
    AES_128_CBC = "aes-128-cbc"
    AES_256_CBC = "aes-256-cbc"
    AES_128_GCM = "aes-128-gcm"


class MacAlgorithm(StrEnum):
    """The record MAC (HMAC with this hash), or ``AEAD`` when the cipher authenticates itself."""

    SHA1 = "sha1"
    SHA256 = "sha256"
    AEAD = "aead"


_MAC_LENGTHS = {MacAlgorithm.SHA1: 20, MacAlgorithm.SHA256: 32, MacAlgorithm.AEAD: 0}


@dataclass(frozen=True)
class SuiteParams:
    suite: CipherSuite
    openssl_name: str
    key_exchange: KeyExchange
    cipher: BulkCipher
    key_length: int  # bytes of encryption key
    mac: MacAlgorithm
    mac_length: int  # bytes of MAC output and MAC key (0 for AEAD suites)

    @property
    def aead(self) -> bool:
        return self.cipher is BulkCipher.AES_128_GCM

    @property
    def block_size(self) -> int:
        return 16 if self.cipher in (BulkCipher.AES_128_CBC, BulkCipher.AES_256_CBC) else 0

    @property
    def fixed_iv_length(self) -> int:
        """IV bytes per direction in the key block: the GCM salt (4); for CBC the 16 bytes
        OpenSSL derives too (unused with TLS 1.2's explicit IVs, but exposed by key-expose)."""
        return 4 if self.aead else self.block_size


def _p(suite: CipherSuite, name: str, kex: str, cipher: str, klen: int, mac: str) -> SuiteParams:
    mac_alg = MacAlgorithm(mac)
    return SuiteParams(suite, name, KeyExchange(kex), BulkCipher(cipher), klen, mac_alg, _MAC_LENGTHS[mac_alg])


SUITES: dict[CipherSuite, SuiteParams] = {
    p.suite: p
    for p in (
        _p(CipherSuite.TLS_RSA_WITH_NULL_SHA, "NULL-SHA", "rsa", "null", 0, "sha1"),
        _p(CipherSuite.TLS_RSA_WITH_NULL_SHA256, "NULL-SHA256", "rsa", "null", 0, "sha256"),
        _p(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, "AES128-SHA", "rsa", "aes-128-cbc", 16, "sha1"),
        _p(CipherSuite.TLS_RSA_WITH_AES_256_CBC_SHA, "AES256-SHA", "rsa", "aes-256-cbc", 32, "sha1"),
        _p(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256, "AES128-SHA256", "rsa", "aes-128-cbc", 16, "sha256"),
        _p(CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, "ECDHE-RSA-AES128-SHA", "ecdhe_rsa", "aes-128-cbc", 16, "sha1"),
        _p(CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256, "ECDHE-RSA-AES128-SHA256", "ecdhe_rsa", "aes-128-cbc", 16, "sha256"),
        _p(CipherSuite.TLS_RSA_WITH_AES_128_GCM_SHA256, "AES128-GCM-SHA256", "rsa", "aes-128-gcm", 16, "aead"),
        _p(CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "ECDHE-RSA-AES128-GCM-SHA256", "ecdhe_rsa", "aes-128-gcm", 16, "aead"),
    )
}

# Server preference order when nothing else is configured: forward-secret first, NULL never.
DEFAULT_SUITES: tuple[CipherSuite, ...] = (
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
    CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256,
    CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
    CipherSuite.TLS_RSA_WITH_AES_256_CBC_SHA,
)


def suite_by_name(name: str) -> CipherSuite:
    """Look a suite up by its IANA name (``TLS_RSA_WITH_NULL_SHA``) or OpenSSL name (``NULL-SHA``)."""
    key = name.strip()
    for params in SUITES.values():
        if key in (params.suite.name, params.openssl_name):
            return params.suite
    known = ", ".join(p.openssl_name for p in SUITES.values())
    raise ValueError(f"unknown cipher suite {name!r}; known: {known}")


def parse_suite_list(text: str) -> tuple[CipherSuite, ...]:
    """Parse a colon- or comma-separated list of suite names (IANA or OpenSSL spelling)."""
    names = [n for n in text.replace(",", ":").split(":") if n.strip()]
    if not names:
        raise ValueError("empty cipher suite list")
    return tuple(suite_by_name(n) for n in names)
