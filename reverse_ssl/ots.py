"""One-time signatures from a one-way function: Lamport (1979) and Winternitz (§3 of the paper).

A one-time signature key signs **one** message.  It is built from nothing but
a one-way function ``f`` (here SHA-256), which is why signing is so cheap --
and why a key must never sign twice: every signature reveals part of the
secret key, and two signatures together let anyone forge a third.

**Lamport** (the paper's scheme, k = 256)::

    secret key  x[i][b]  for i in 0..255, b in {0, 1}       (512 random 32-byte strings)
    public key  y[i][b] = f(x[i][b])                          (512 hashes, 16 KiB)
    sign(M):    d = SHA-256(M);  reveal x[i][d_i] for every bit i   (256 look-ups)
    verify:     f(sig[i]) == y[i][d_i] for every i                   (256 hashes)

Signing is the paper's "four lines of code": one hash of the message plus
k table look-ups.

**Winternitz** (a compact scheme in the spirit of the paper's reference [5];
parameter ``w`` = 4, 16 or 256): the digest is cut into base-``w`` digits
d_1..d_l1, a checksum C = sum(w - 1 - d_i) is appended in base ``w`` (so an
attacker cannot *increase* a digit without *decreasing* another), and each
digit selects a point on a hash chain of length ``w - 1``::

    secret x_i,   public y_i = f^(w-1)(x_i),   sig_i = f^(d_i)(x_i),
    verify: f^(w-1-d_i)(sig_i) == y_i

With w = 16 the public key and signature are 67 x 32 bytes (2.1 KiB) instead of
16 KiB / 8 KiB.  Signing would cost about 7.5 hashes per digit, but because the
key is generated *offline* we store every chain point, so the online step is
again pure look-ups -- "less than one hash computation" as [5] promises.
The secret tables are numpy arrays so that the look-ups are one
vectorised indexing operation (about 10-20 microseconds in CPython, most of it
call overhead; in C it would be well under one).

A :class:`OneTimeSigner` refuses a second :meth:`~OneTimeSigner.sign` with
:class:`reverse_ssl.errors.OneTimeKeyReused`.  Randomness comes from an
injected ``rng(n) -> bytes``; nothing here reads a clock or global state.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from .errors import OneTimeKeyReused

__all__ = [
    "OTSScheme",
    "OneTimeSigner",
    "lamport_keygen",
    "lamport_verify",
    "winternitz_keygen",
    "winternitz_verify",
    "WinternitzParams",
    "winternitz_params",
    "keygen",
    "verify",
    "public_key_size",
    "signature_size",
    "N",
]

N = 32
"""Bytes of every hash value and secret element (SHA-256)."""

Random = Callable[[int], bytes]


def _f(x: bytes) -> bytes:
    return hashlib.sha256(x).digest()


class OTSScheme(IntEnum):
    """Wire identifiers of the one-time schemes (``RSA_FALLBACK`` means: no one-time key at all)."""

    RSA_FALLBACK = 0
    LAMPORT = 1
    WINTERNITZ_4 = 2
    WINTERNITZ_16 = 3
    WINTERNITZ_256 = 4


_W_OF = {OTSScheme.WINTERNITZ_4: 4, OTSScheme.WINTERNITZ_16: 16, OTSScheme.WINTERNITZ_256: 256}


@dataclass(frozen=True)
class WinternitzParams:
    w: int
    log_w: int
    l1: int  # digits of the message digest
    l2: int  # digits of the checksum

    @property
    def length(self) -> int:
        return self.l1 + self.l2


def winternitz_params(w: int) -> WinternitzParams:
    """Parameters for a 256-bit digest: l1 = 256 / log2(w), l2 = digits of the largest checksum."""
    if w not in (4, 16, 256):
        raise ValueError("w must be 4, 16 or 256")
    log_w = w.bit_length() - 1
    l1 = 256 // log_w
    max_checksum = l1 * (w - 1)
    l2 = 1
    while w**l2 <= max_checksum:
        l2 += 1
    return WinternitzParams(w, log_w, l1, l2)


def _digits(digest: bytes, p: WinternitzParams) -> list[int]:
    """Base-w digits of the digest followed by the base-w digits of its checksum."""
    value = int.from_bytes(digest, "big")
    mask = p.w - 1
    msg = [(value >> (256 - p.log_w * (i + 1))) & mask for i in range(p.l1)]
    checksum = sum(mask - d for d in msg)
    csum = [(checksum >> (p.log_w * (p.l2 - 1 - i))) & mask for i in range(p.l2)]
    return msg + csum


def _digit_array(digest: bytes, p: WinternitzParams) -> np.ndarray:
    """:func:`_digits` vectorised (the online path): message digits from the bit array, then checksum."""
    bits = np.unpackbits(np.frombuffer(digest, dtype=np.uint8)).reshape(p.l1, p.log_w)
    msg = bits.astype(np.int64) @ (1 << np.arange(p.log_w - 1, -1, -1, dtype=np.int64))
    checksum = int(p.l1 * (p.w - 1) - int(msg.sum()))
    csum = [(checksum >> (p.log_w * (p.l2 - 1 - i))) & (p.w - 1) for i in range(p.l2)]
    return np.concatenate([msg, np.array(csum, dtype=np.int64)])


_POSITIONS = np.arange(256)


@dataclass(eq=False)
class OneTimeSigner:
    """A one-time secret key with everything precomputed for look-up-only signing.

    ``table[i, j]`` (a read-only ``uint8`` array of shape positions x choices x 32)
    is the value revealed at position ``i`` for choice ``j``: the pair
    (x_i0, x_i1) for Lamport, the whole chain f^0..f^(w-1)(x_i) for
    Winternitz.  Signing is one fancy-indexing look-up, ``table[i, m_i]`` for
    all ``i`` at once -- the paper's "four lines of code" as one array
    operation.  ``used`` turns True at the first signature.
    """

    scheme: OTSScheme
    public_key: bytes
    table: np.ndarray = field(repr=False)
    used: bool = False

    def reveal(self, position: int, choice: int) -> bytes:
        """The secret value at (position, choice) -- for teaching and tests."""
        secret: bytes = self.table[position, choice].tobytes()
        return secret

    def sign(self, message: bytes) -> bytes:
        """The one-time signature of ``SHA-256(message)``; a second call raises ``OneTimeKeyReused``."""
        if self.used:
            raise OneTimeKeyReused("this one-time key has already signed a message")
        self.used = True
        digest = hashlib.sha256(message).digest()
        if self.scheme is OTSScheme.LAMPORT:
            # "release x_i,1 if m_i = 1 else x_i,0" for the 256 bits m_i of the digest
            bits = np.unpackbits(np.frombuffer(digest, dtype=np.uint8))
            return self.table[_POSITIONS, bits].tobytes()
        digits = _digit_array(digest, winternitz_params(_W_OF[self.scheme]))
        signature: bytes = self.table[np.arange(len(digits)), digits].tobytes()
        return signature


def _as_table(values: bytes, positions: int, choices: int) -> np.ndarray:
    return np.frombuffer(values, dtype=np.uint8).reshape(positions, choices, N)


def lamport_keygen(rng: Random) -> OneTimeSigner:
    """2k = 512 random secrets and their 512 images under f."""
    raw = rng(2 * 256 * N)
    if len(raw) != 2 * 256 * N:
        raise ValueError("rng returned the wrong number of bytes")
    public = b"".join(_f(raw[j * N : (j + 1) * N]) for j in range(512))
    return OneTimeSigner(OTSScheme.LAMPORT, public, _as_table(raw, 256, 2))


def lamport_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True iff ``signature`` is a Lamport signature of ``message`` under ``public_key``."""
    if len(public_key) != 2 * 256 * N or len(signature) != 256 * N:
        return False
    bits = int.from_bytes(hashlib.sha256(message).digest(), "big")
    expected = b"".join(
        public_key[(2 * i + ((bits >> (255 - i)) & 1)) * N : (2 * i + ((bits >> (255 - i)) & 1) + 1) * N]
        for i in range(256)
    )
    got = b"".join(_f(signature[i * N : (i + 1) * N]) for i in range(256))
    return hmac.compare_digest(got, expected)


def winternitz_keygen(rng: Random, w: int = 16) -> OneTimeSigner:
    """l random chain starts; every chain point is kept so that signing is a look-up."""
    p = winternitz_params(w)
    raw = rng(p.length * N)
    if len(raw) != p.length * N:
        raise ValueError("rng returned the wrong number of bytes")
    chains = []
    for i in range(p.length):
        x = raw[i * N : (i + 1) * N]
        chain = [x]
        for _ in range(w - 1):
            x = _f(x)
            chain.append(x)
        chains.append(tuple(chain))
    public = b"".join(c[-1] for c in chains)
    scheme = {4: OTSScheme.WINTERNITZ_4, 16: OTSScheme.WINTERNITZ_16, 256: OTSScheme.WINTERNITZ_256}[w]
    return OneTimeSigner(scheme, public, _as_table(b"".join(b"".join(c) for c in chains), p.length, w))


def winternitz_verify(public_key: bytes, message: bytes, signature: bytes, w: int = 16) -> bool:
    """True iff each signature element, hashed ``w - 1 - d_i`` more times, meets the public key."""
    p = winternitz_params(w)
    if len(public_key) != p.length * N or len(signature) != p.length * N:
        return False
    digits = _digits(hashlib.sha256(message).digest(), p)
    ends = []
    for i, d in enumerate(digits):
        x = signature[i * N : (i + 1) * N]
        for _ in range(w - 1 - d):
            x = _f(x)
        ends.append(x)
    return hmac.compare_digest(b"".join(ends), public_key)


def keygen(scheme: OTSScheme, rng: Random) -> OneTimeSigner:
    """A fresh one-time key of ``scheme``."""
    if scheme is OTSScheme.LAMPORT:
        return lamport_keygen(rng)
    if scheme in _W_OF:
        return winternitz_keygen(rng, _W_OF[scheme])
    raise ValueError(f"{scheme!r} is not a one-time signature scheme")


def verify(scheme: OTSScheme, public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Dispatch to the scheme's verifier; unknown schemes never verify."""
    if scheme is OTSScheme.LAMPORT:
        return lamport_verify(public_key, message, signature)
    if scheme in _W_OF:
        return winternitz_verify(public_key, message, signature, _W_OF[scheme])
    return False


def public_key_size(scheme: OTSScheme) -> int:
    if scheme is OTSScheme.LAMPORT:
        return 2 * 256 * N
    return winternitz_params(_W_OF[scheme]).length * N


def signature_size(scheme: OTSScheme) -> int:
    if scheme is OTSScheme.LAMPORT:
        return 256 * N
    return winternitz_params(_W_OF[scheme]).length * N
