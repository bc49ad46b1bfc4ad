"""Seam 1: private-key operations of the server, behind a small protocol.

A TLS 1.2 server uses its certificate's private key twice: to decrypt the
RSA-encrypted premaster secret (RSA key exchange) and to sign the ephemeral
ECDH parameters (ECDHE_RSA).  :class:`ServerConnection` does both through a
:class:`PrivateKeyOperations` object.  :class:`LocalKey` holds the key in this
process; WebALPS (the trusted co-server) implements the same protocol by
forwarding both operations to a guardian process that never reveals the key.

``decrypt_premaster`` must **not** raise on bad padding: it returns ``None``
(or any wrong-length bytes) and the connection then continues with a random
premaster secret, exactly as when decryption succeeds (RFC 5246 §7.4.7.1,
the Bleichenbacher countermeasure).  The connection never reveals which
happened: the handshake simply fails at the Finished message.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from .messages import SignatureScheme

__all__ = ["PrivateKeyOperations", "LocalKey", "scheme_hash", "scheme_padding", "SUPPORTED_SCHEMES"]

# Preference order.  PKCS#1 v1.5 first: its signatures are deterministic, so a
# handshake driven by a seeded RNG produces the same transcript every time.
SUPPORTED_SCHEMES: tuple[SignatureScheme, ...] = (
    SignatureScheme.RSA_PKCS1_SHA256,
    SignatureScheme.RSA_PSS_RSAE_SHA256,
    SignatureScheme.RSA_PSS_RSAE_SHA384,
    SignatureScheme.RSA_PKCS1_SHA384,
    SignatureScheme.RSA_PSS_RSAE_SHA512,
    SignatureScheme.RSA_PKCS1_SHA512,
    SignatureScheme.RSA_PKCS1_SHA1,
)


_HASHES: dict[int, type[hashes.HashAlgorithm]] = {
    SignatureScheme.RSA_PKCS1_SHA1: hashes.SHA1,
    SignatureScheme.RSA_PKCS1_SHA256: hashes.SHA256,
    SignatureScheme.RSA_PKCS1_SHA384: hashes.SHA384,
    SignatureScheme.RSA_PKCS1_SHA512: hashes.SHA512,
    SignatureScheme.RSA_PSS_RSAE_SHA256: hashes.SHA256,
    SignatureScheme.RSA_PSS_RSAE_SHA384: hashes.SHA384,
    SignatureScheme.RSA_PSS_RSAE_SHA512: hashes.SHA512,
}


def scheme_hash(scheme: int) -> hashes.HashAlgorithm:
    """The hash of a TLS SignatureScheme; ValueError for schemes this core does not use."""
    try:
        return _HASHES[scheme]()
    except KeyError:
        raise ValueError(f"unsupported signature scheme 0x{scheme:04x}") from None


def scheme_padding(scheme: int) -> padding.AsymmetricPadding:
    if scheme >= 0x0800:
        return padding.PSS(mgf=padding.MGF1(scheme_hash(scheme)), salt_length=padding.PSS.DIGEST_LENGTH)
    return padding.PKCS1v15()


@runtime_checkable
class PrivateKeyOperations(Protocol):
    """What the server needs from its private key."""

    def decrypt_premaster(self, encrypted: bytes) -> bytes | None:
        """RSA-decrypt an EncryptedPreMasterSecret; ``None`` on any failure (never raise)."""
        ...

    def sign(self, data: bytes, scheme: int) -> bytes:
        """Sign ``data`` with the given TLS SignatureScheme (0x0401 = rsa_pkcs1_sha256, ...)."""
        ...


class LocalKey:
    """The default provider: an RSA private key held in this process."""

    def __init__(self, private_key: rsa.RSAPrivateKey) -> None:
        if not isinstance(private_key, rsa.RSAPrivateKey):
            raise TypeError("LocalKey needs an RSA private key")
        self._key = private_key

    def decrypt_premaster(self, encrypted: bytes) -> bytes | None:
        try:
            return self._key.decrypt(encrypted, padding.PKCS1v15())
        except ValueError:
            return None

    def sign(self, data: bytes, scheme: int) -> bytes:
        return self._key.sign(data, scheme_padding(scheme), scheme_hash(scheme))
