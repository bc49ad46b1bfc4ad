"""Ephemeral elliptic-curve Diffie-Hellman for the ECDHE_RSA key exchange (RFC 4492, RFC 8422).

Both roles do the same two things: make a key pair from 32 bytes of the
connection's injected RNG (so a seeded handshake is reproducible), and combine
their private key with the peer's public point into the premaster secret.
The server signs its public point in the ServerKeyExchange; the client sends
its own in the ClientKeyExchange.  The curve arithmetic is ``cryptography``'s
(OpenSSL); this module only chooses encodings:

* ``x25519`` (RFC 7748): 32-byte private scalar and public u-coordinate;
* ``secp256r1``: the seed reduced into ``[1, n-1]`` as the private scalar, the
  public key as an *uncompressed* X9.62 point (``04 || x || y``, 65 bytes) --
  the only point format a TLS 1.2 peer must accept (RFC 8422 §5.1.2).

An invalid peer point (wrong length, compressed, not on the curve) is the
peer's fault: :class:`tls12.errors.IllegalParameter`.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, x25519

from .errors import IllegalParameter
from .messages import NamedGroup

__all__ = ["GROUP_IDS", "ecdhe_keypair", "ecdhe_shared_secret"]

GROUP_IDS: dict[str, NamedGroup] = {"x25519": NamedGroup.X25519, "secp256r1": NamedGroup.SECP256R1}
"""Configuration names (``ServerConfig.groups``) of the supported groups and their code points."""

_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def ecdhe_keypair(group: int, seed: bytes) -> tuple[bytes, bytes]:
    """(private bytes, public point) for ``group`` from 32 random bytes (the injected RNG)."""
    if group == NamedGroup.X25519:
        priv = x25519.X25519PrivateKey.from_private_bytes(seed)
        pub = priv.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return seed, pub
    if group == NamedGroup.SECP256R1:
        scalar = int.from_bytes(seed, "big") % (_P256_ORDER - 1) + 1
        key = ec.derive_private_key(scalar, ec.SECP256R1())
        pub = key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return scalar.to_bytes(32, "big"), pub
    raise ValueError(f"unsupported group {group}")


def ecdhe_shared_secret(group: int, private: bytes, peer_public: bytes) -> bytes:
    """The ECDH shared secret; IllegalParameter for an invalid peer point."""
    try:
        if group == NamedGroup.X25519:
            if len(peer_public) != 32:
                raise ValueError("x25519 public keys are 32 bytes")
            priv = x25519.X25519PrivateKey.from_private_bytes(private)
            return priv.exchange(x25519.X25519PublicKey.from_public_bytes(peer_public))
        if group == NamedGroup.SECP256R1:
            if len(peer_public) != 65 or peer_public[0] != 4:
                raise ValueError("only uncompressed P-256 points are accepted")
            key = ec.derive_private_key(int.from_bytes(private, "big"), ec.SECP256R1())
            peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), peer_public)
            return key.exchange(ec.ECDH(), peer)
    except ValueError as exc:
        raise IllegalParameter(f"invalid ECDH public value: {exc}") from None
    raise IllegalParameter(f"unsupported group {group}")
