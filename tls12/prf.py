"""The TLS 1.2 pseudo-random function and key schedule (RFC 5246 §5, §6.3, §7.4.9; RFC 7627).

All TLS 1.2 suites implemented here use ``P_SHA256``::

    PRF(secret, label, seed) = P_SHA256(secret, label + seed)
    P_hash(secret, seed) = HMAC(secret, A(1) + seed) + HMAC(secret, A(2) + seed) + ...
    A(0) = seed,  A(i) = HMAC(secret, A(i-1))

The master secret is ``PRF(pre_master, "master secret", client_random +
server_random)[:48]``, or with the extended master secret (RFC 7627)
``PRF(pre_master, "extended master secret", session_hash)[:48]`` where
``session_hash`` is the hash of the handshake transcript up to and including
ClientKeyExchange: it binds the master secret to the whole handshake and so
defeats the triple-handshake attack.  The key block is cut, in order, into
client MAC key, server MAC key, client key, server key, client IV, server IV.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

try:  # OpenSSL's HMAC object, as hmac.new(key, digestmod=<name>) would wrap it, without the wrapper
    from _hashlib import hmac_new as _hmac_new
except ImportError:  # pragma: no cover - CPython without OpenSSL's _hashlib
    _hmac_new: Callable[..., Any] = hmac.new  # type: ignore[no-redef]

__all__ = [
    "prf",
    "p_hash",
    "master_secret",
    "extended_master_secret",
    "KeyBlock",
    "key_block",
    "verify_data",
    "transcript_hash",
]


def p_hash(secret: bytes, seed: bytes, length: int, hash_name: str = "sha256") -> bytes:
    """The data-expansion function ``P_hash`` of RFC 5246 §5.

    The HMAC key is set up once (OpenSSL's ``HMAC_CTX``, :data:`_hmac_new`) and the keyed
    context copied for each of the ``2 * ceil(length / hash size)`` HMACs: a copy costs a
    third of a one-shot :func:`hmac.digest`, which sets the key up (two compressions) again.
    """
    if length < 0:
        raise ValueError("length must be non-negative")
    keyed = _hmac_new(secret, digestmod=hash_name)
    copy = keyed.copy
    blocks = []
    a = seed
    for _ in range(-(-length // keyed.digest_size)):
        h = copy()
        h.update(a)
        a = h.digest()  # A(i) = HMAC(secret, A(i-1))
        h = copy()
        h.update(a + seed)
        blocks.append(h.digest())  # HMAC(secret, A(i) + seed)
    return b"".join(blocks)[:length]


def prf(secret: bytes, label: bytes, seed: bytes, length: int, hash_name: str = "sha256") -> bytes:
    """``PRF(secret, label, seed)`` truncated to ``length`` bytes."""
    return p_hash(secret, label + seed, length, hash_name)


def master_secret(pre_master: bytes, client_random: bytes, server_random: bytes) -> bytes:
    return prf(pre_master, b"master secret", client_random + server_random, 48)


def extended_master_secret(pre_master: bytes, session_hash: bytes) -> bytes:
    return prf(pre_master, b"extended master secret", session_hash, 48)


def transcript_hash(handshake_messages: bytes) -> bytes:
    """Hash of the concatenated handshake messages (SHA-256 for every suite here)."""
    return hashlib.sha256(handshake_messages).digest()


@dataclass(frozen=True)
class KeyBlock:
    client_mac_key: bytes
    server_mac_key: bytes
    client_key: bytes
    server_key: bytes
    client_iv: bytes
    server_iv: bytes


def key_block(
    master: bytes,
    client_random: bytes,
    server_random: bytes,
    mac_length: int,
    key_length: int,
    iv_length: int,
) -> KeyBlock:
    """Expand the master secret into the connection's keys (RFC 5246 §6.3; note server_random first).

    With TLS 1.2's explicit per-record IVs the IVs are not used by CBC
    records; they are still derived so that the key block has OpenSSL's layout
    and a key-expose message can carry the same (key, IV) pair as the paper.
    """
    n = 2 * (mac_length + key_length + iv_length)
    block = prf(master, b"key expansion", server_random + client_random, n)
    parts = []
    pos = 0
    for size in (mac_length, mac_length, key_length, key_length, iv_length, iv_length):
        parts.append(block[pos : pos + size])
        pos += size
    return KeyBlock(*parts)


def verify_data(master: bytes, is_client: bool, handshake_hash: bytes) -> bytes:
    """The 12-byte Finished ``verify_data`` (RFC 5246 §7.4.9)."""
    label = b"client finished" if is_client else b"server finished"
    return prf(master, label, handshake_hash, 12)
