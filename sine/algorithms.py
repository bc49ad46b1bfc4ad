"""Hash functions and signature schemes used by SINE tags, with their wire identifiers.

The tag names both algorithms by one byte each (see ``FORMAT.md``):

==========  ==========================  ==========================================
identifier  hash                        signature
==========  ==========================  ==========================================
1           SHA-256 (default)           RSA-PSS, SHA-256, MGF1-SHA-256, salt 32 (default, 2048 bit)
2           SHA-384                     Ed25519
3           SHA-512                     ECDSA P-256 with SHA-256 (DER signature)
==========  ==========================  ==========================================

Only :mod:`hashlib` and :mod:`cryptography` provide primitives; the hash chain built on top of
them lives in :mod:`sine.tag`.  A :class:`SigningKey` signs, a :class:`VerifyingKey` verifies and
counts how many public-key verifications it performed (Table II of the paper is measured with
that counter).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

__all__ = [
    "HashAlg",
    "SigAlg",
    "SigningKey",
    "VerifyingKey",
    "hash_new",
    "hash_constructor",
    "digest_size",
]


class HashAlg(IntEnum):
    """Hash function of the chain and of AT_sign digests."""

    SHA256 = 1
    SHA384 = 2
    SHA512 = 3


class SigAlg(IntEnum):
    """Signature scheme of ``Y_0``."""

    RSA_PSS_SHA256 = 1
    ED25519 = 2
    ECDSA_P256_SHA256 = 3


_HASH_NAMES = {HashAlg.SHA256: "sha256", HashAlg.SHA384: "sha384", HashAlg.SHA512: "sha512"}
_DIGEST_SIZES = {HashAlg.SHA256: 32, HashAlg.SHA384: 48, HashAlg.SHA512: 64}


def hash_new(alg: HashAlg, data: Any = b"") -> Any:
    """A fresh :mod:`hashlib` object for ``alg`` (``data`` may be a memoryview)."""
    return hashlib.new(_HASH_NAMES[alg], data)


def hash_constructor(alg: HashAlg) -> Any:
    """The direct :mod:`hashlib` constructor (e.g. ``hashlib.sha256``), for hot loops."""
    return getattr(hashlib, _HASH_NAMES[alg])


def digest_size(alg: HashAlg) -> int:
    """Output length of ``alg`` in bytes."""
    return _DIGEST_SIZES[alg]


_PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)


@dataclass(frozen=True)
class SigningKey:
    """A private key plus the scheme it signs with.  Build one with :meth:`generate`."""

    alg: SigAlg
    private_key: Any

    @classmethod
    def generate(cls, alg: SigAlg = SigAlg.RSA_PSS_SHA256, rsa_bits: int = 2048) -> SigningKey:
        """A new key for ``alg`` (RSA keys of ``rsa_bits`` bits, at least 2048)."""
        alg = SigAlg(alg)
        if alg is SigAlg.RSA_PSS_SHA256:
            if rsa_bits < 2048:
                raise ValueError("RSA keys shorter than 2048 bits are not accepted")
            key: Any = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
        elif alg is SigAlg.ED25519:
            key = ed25519.Ed25519PrivateKey.generate()
        else:
            key = ec.generate_private_key(ec.SECP256R1())
        return cls(alg, key)

    @classmethod
    def from_pem(cls, pem: bytes) -> SigningKey:
        """Load a PKCS#8 PEM private key; the scheme follows from the key type."""
        key = serialization.load_pem_private_key(pem, password=None)
        return cls(_alg_of(key), key)

    def to_pem(self) -> bytes:
        """Unencrypted PKCS#8 PEM (protect the file with permissions)."""
        pem: bytes = self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return pem

    def sign(self, message: bytes) -> bytes:
        """Sign ``message`` with this key's scheme."""
        if self.alg is SigAlg.RSA_PSS_SHA256:
            return bytes(self.private_key.sign(message, _PSS, hashes.SHA256()))
        if self.alg is SigAlg.ED25519:
            return bytes(self.private_key.sign(message))
        return bytes(self.private_key.sign(message, ec.ECDSA(hashes.SHA256())))

    def verifying_key(self) -> VerifyingKey:
        """The matching public key."""
        return VerifyingKey(self.alg, self.private_key.public_key())


class VerifyingKey:
    """A public key; :meth:`verify` returns a bool and increments :attr:`verifications`."""

    def __init__(self, alg: SigAlg, public_key: Any) -> None:
        self.alg = SigAlg(alg)
        self.public_key = public_key
        self.verifications = 0

    @classmethod
    def from_pem(cls, pem: bytes) -> VerifyingKey:
        """Load a SubjectPublicKeyInfo PEM public key."""
        key = serialization.load_pem_public_key(pem)
        return cls(_alg_of(key), key)

    def to_pem(self) -> bytes:
        return bytes(
            self.public_key.public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def verify(self, message: bytes, signature: bytes) -> bool:
        """One public-key verification (counted), never raises on a bad signature."""
        self.verifications += 1
        try:
            if self.alg is SigAlg.RSA_PSS_SHA256:
                self.public_key.verify(signature, message, _PSS, hashes.SHA256())
            elif self.alg is SigAlg.ED25519:
                self.public_key.verify(signature, message)
            else:
                self.public_key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            return False
        return True


def _alg_of(key: Any) -> SigAlg:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        if key.key_size < 2048:
            raise ValueError("RSA keys shorter than 2048 bits are not accepted")
        return SigAlg.RSA_PSS_SHA256
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return SigAlg.ED25519
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        if key.curve.name != "secp256r1":
            raise ValueError(f"unsupported curve {key.curve.name}")
        return SigAlg.ECDSA_P256_SHA256
    raise TypeError(f"unsupported key type {type(key).__name__}")
