"""Client puzzles made of RSA key generation (§6 of the paper), sans-IO.

**First construction.**  The server draws a random ``n_bits``-bit number m and
asks for an RSA key whose modulus n lies in [m - 2^K, m + 2^K].  The client
picks a prime p, searches a prime q in [(m - 2^K) / p, (m + 2^K) / p], and
replies (n, e, s) where s is its self-signature -- proof that it holds the
private key (a fake modulus in the window has no verifiable signature).

**Second construction** (adjustable difficulty, two-level verification).
The server sends (H(m), y, K, p): y is m with the ``p`` bits after the
leading one erased.  The client tries the 2^p values x until H(x || y) = H(m)
-- on average 2^(p-1) hashes -- and then solves the first construction for m.
The reply adds x.

**Verification order** (Figure 3), cheapest first, so that bogus replies cost
the server as little as possible: (0) replay cache (one hash and a look-up;
not in the paper, which relies on fresh m, but it names the refusal), (1) hash
pre-image (one hash; second construction only), (2) modulus inside the window
(a subtraction), (3) self-signature (one RSA public-key operation) -- skipped when
the policy says so: the paper lets the server skip it when a pre-signed
one-time key is available, because the client proves it holds the key
anyway by decrypting the premaster secret.

**About K = 81** (the paper's value for 1024-bit moduli): with balanced
primes the window for q has width 2^(K+1) / p, i.e. 2^(82 - 512) -- far below
one integer.  No 1024-bit RSA modulus with two 512-bit primes can be *built*
inside a 2^82 window (the paper's search-space argument misplaces a square
root).  A window only holds primes q when K is at least about
``n_bits / 2 + log2(ln q)``; below that the solver must redraw p many times,
which is what makes K a difficulty knob in a narrow band.
:func:`expected_primes_per_attempt` gives the number; :class:`PuzzleParams`
refuses infeasible (n_bits, K) pairs, and the experiments measure solve time
against K above the threshold.

Everything takes an injected ``rng(n) -> bytes``; nothing reads a clock.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.buffer import Buffer, Writer
from tls12.errors import DecodeError

from .errors import (
    BadSelfSignature,
    MissingSelfSignature,
    ModulusOutOfRange,
    PuzzleReplayed,
    WrongPreimage,
)
from .primes import _rand_below, prime_in_interval, random_prime

__all__ = [
    "PAPER_K",
    "Construction",
    "SignaturePolicy",
    "PuzzleParams",
    "PuzzleRequest",
    "PuzzleReply",
    "PuzzleChallenge",
    "SolvedPuzzle",
    "ReplayCache",
    "expected_primes_per_attempt",
    "min_feasible_k",
    "make_puzzle",
    "solve_preimage",
    "solve",
    "verify_reply",
    "pull_puzzle_request",
    "push_puzzle_request",
    "pull_puzzle_reply",
    "push_puzzle_reply",
]

PAPER_K = 81
"""The paper's K for 1024-bit moduli (infeasible with balanced primes; see the module docstring)."""

MIN_BITS, MAX_BITS = 512, 8192
SELF_SIGNATURE_LABEL = b"reverse-ssl puzzle self-signature\x00"
Random = Callable[[int], bytes]


class Construction(IntEnum):
    RANGE = 1
    """First construction: modulus in [m - 2^K, m + 2^K]."""
    HASH_AND_RANGE = 2
    """Second construction: p-bit hash pre-image, then the first construction."""


class SignaturePolicy(Enum):
    """When the server verifies the client's self-signature (step 4 of Figure 3)."""

    ALWAYS = "always"
    NEVER = "never"
    WHEN_POOL_EMPTY = "when_pool_empty"
    """The paper's choice: verify only if no pre-signed one-time key is ready."""


def expected_primes_per_attempt(n_bits: int, k: int) -> float:
    """Expected number of primes q in the window (m +- 2^K) / p for a balanced ``n_bits/2``-bit p."""
    log2_width = (k + 1) - (n_bits // 2) + 0.5  # p ~ 2^(n/2 - 0.5) on average
    ln_q = (n_bits - n_bits // 2) * math.log(2)
    return math.pow(2.0, log2_width) / ln_q


def min_feasible_k(n_bits: int, primes_per_attempt: float = 0.05) -> int:
    """Smallest K for which one attempt at p still finds a prime with useful probability."""
    k = 1
    while expected_primes_per_attempt(n_bits, k) < primes_per_attempt:
        k += 1
    return k


@dataclass(frozen=True)
class PuzzleParams:
    """What the server asks for: construction, modulus size, window 2^K, pre-image bits p."""

    construction: Construction = Construction.RANGE
    n_bits: int = 1024
    k: int | None = None
    """log2 of the half-width of the window; default ``n_bits / 2 + 16`` (see the module docstring)."""
    preimage_bits: int = 0
    e: int = 65537

    def __post_init__(self) -> None:
        if self.k is None:
            object.__setattr__(self, "k", self.n_bits // 2 + 16)
        assert self.k is not None
        if not MIN_BITS <= self.n_bits <= MAX_BITS or self.n_bits % 8:
            raise ValueError(f"n_bits must be a multiple of 8 in [{MIN_BITS}, {MAX_BITS}]")
        if not 1 <= self.k < self.n_bits - 1:
            raise ValueError("K must be in [1, n_bits - 2]")
        if self.k < min_feasible_k(self.n_bits):
            raise ValueError(
                f"K = {self.k} is infeasible for {self.n_bits}-bit moduli with balanced primes: "
                f"expected {expected_primes_per_attempt(self.n_bits, self.k):.3g} primes per attempt; "
                f"use K >= {min_feasible_k(self.n_bits)}"
            )
        if self.construction is Construction.RANGE and self.preimage_bits:
            raise ValueError("the first construction has no hash pre-image")
        if self.construction is Construction.HASH_AND_RANGE and not 1 <= self.preimage_bits <= 32:
            raise ValueError("preimage_bits must be in [1, 32] for the second construction")
        if self.construction is Construction.HASH_AND_RANGE and self.k >= self.n_bits - 1 - self.preimage_bits:
            raise ValueError("K must leave the pre-image bits of m fixed")
        if self.e < 3 or self.e % 2 == 0 or self.e >= 1 << 32:
            raise ValueError("e must be odd, >= 3 and < 2^32")


@dataclass(frozen=True)
class PuzzleRequest:
    """The puzzle on the wire: (m, K) or (H(m), y, K, p)."""

    construction: Construction
    n_bits: int
    k: int
    preimage_bits: int
    digest: bytes  # H(m), empty for the first construction
    value: bytes  # m, or y (= m with its pre-image bits erased)


@dataclass(frozen=True)
class PuzzleReply:
    """The client's answer: (x,) n, e, s."""

    preimage: bytes  # x (big-endian, ceil(p / 8) bytes), empty for the first construction
    modulus: bytes
    e: int
    self_signature: bytes


@dataclass(frozen=True)
class PuzzleChallenge:
    """The server's secret side of one puzzle: the request and the m it hides."""

    params: PuzzleParams
    m: int
    request: PuzzleRequest


@dataclass
class SolvedPuzzle:
    """What the client keeps: its reply and the fresh private key (destroyed after the session)."""

    reply: PuzzleReply
    private_key: rsa.RSAPrivateKey
    hashes_tried: int
    p_attempts: int
    q_candidates: int


def _shift(params: PuzzleParams | PuzzleRequest) -> int:
    return params.n_bits - 1 - params.preimage_bits


def _window(params: PuzzleParams) -> int:
    """``params.k``: ``None`` only asks ``PuzzleParams.__post_init__`` for the default."""
    assert params.k is not None
    return params.k


def make_puzzle(params: PuzzleParams, rng: Random) -> PuzzleChallenge:
    """A fresh m (top bit set) and the request that hides it."""
    nbytes = params.n_bits // 8
    m = (1 << (params.n_bits - 1)) | _rand_below(rng, 1 << (params.n_bits - 1))
    if params.construction is Construction.RANGE:
        request = PuzzleRequest(params.construction, params.n_bits, _window(params), 0, b"", m.to_bytes(nbytes, "big"))
    else:
        mask = ((1 << params.preimage_bits) - 1) << _shift(params)
        y = m & ~mask
        digest = hashlib.sha256(m.to_bytes(nbytes, "big")).digest()
        request = PuzzleRequest(params.construction, params.n_bits, _window(params), params.preimage_bits, digest, y.to_bytes(nbytes, "big"))
    return PuzzleChallenge(params, m, request)


def solve_preimage(request: PuzzleRequest) -> tuple[int, int]:
    """(m, hashes tried): brute force of the p-bit x with H(x || y) = H(m)."""
    y = int.from_bytes(request.value, "big")
    shift = _shift(request)
    nbytes = request.n_bits // 8
    sha = hashlib.sha256
    for x in range(1 << request.preimage_bits):
        cand = y | (x << shift)
        if sha(cand.to_bytes(nbytes, "big")).digest() == request.digest:
            return cand, x + 1
    raise WrongPreimage("no pre-image exists: the puzzle is malformed")


def _signed_message(m_bytes: bytes, n: int, e: int) -> bytes:
    nbytes = (n.bit_length() + 7) // 8
    return SELF_SIGNATURE_LABEL + m_bytes + n.to_bytes(nbytes, "big") + e.to_bytes(4, "big")


def solve(request: PuzzleRequest, rng: Random, *, e: int = 65537, max_p_attempts: int = 100_000) -> SolvedPuzzle:
    """Solve a puzzle: (pre-image,) then p random, q prime in the window, self-sign."""
    hashes_tried = 0
    if request.construction is Construction.HASH_AND_RANGE:
        m, hashes_tried = solve_preimage(request)
    else:
        m = int.from_bytes(request.value, "big")
    lo_n, hi_n = m - (1 << request.k), m + (1 << request.k)
    p_bits = request.n_bits // 2
    q_candidates = 0
    for attempt in range(1, max_p_attempts + 1):
        p = random_prime(p_bits, rng, e=e)
        q, tried = prime_in_interval(-(-lo_n // p), hi_n // p, rng, e=e)
        q_candidates += tried
        if q is None or q == p:
            continue
        n = p * q
        phi = (p - 1) * (q - 1)
        d = pow(e, -1, phi)
        public = rsa.RSAPublicNumbers(e, n)
        key = rsa.RSAPrivateNumbers(
            p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q), public
        ).private_key()
        m_bytes = m.to_bytes(request.n_bits // 8, "big")
        sig = key.sign(_signed_message(m_bytes, n, e), padding.PKCS1v15(), hashes.SHA256())
        x_bytes = b""
        if request.construction is Construction.HASH_AND_RANGE:
            x = (m >> _shift(request)) & ((1 << request.preimage_bits) - 1)
            x_bytes = x.to_bytes((request.preimage_bits + 7) // 8, "big")
        reply = PuzzleReply(x_bytes, n.to_bytes((n.bit_length() + 7) // 8, "big"), e, sig)
        return SolvedPuzzle(reply, key, hashes_tried, attempt, q_candidates)
    raise RuntimeError(f"no modulus found in the window after {max_p_attempts} choices of p")


class ReplayCache:
    """The last ``capacity`` accepted moduli (by SHA-256), shared by a server's connections."""

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def __contains__(self, modulus: bytes) -> bool:
        return hashlib.sha256(modulus).digest() in self._seen

    def add(self, modulus: bytes) -> None:
        self._seen[hashlib.sha256(modulus).digest()] = None
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)


def verify_reply(
    challenge: PuzzleChallenge,
    reply: PuzzleReply,
    *,
    verify_signature: bool = True,
    replay_cache: ReplayCache | None = None,
) -> rsa.RSAPublicKey:
    """Figure 3, cheapest check first; the client's public key, or a typed refusal."""
    params = challenge.params
    nbytes = params.n_bits // 8
    m_bytes = challenge.m.to_bytes(nbytes, "big")
    if replay_cache is not None and reply.modulus in replay_cache:
        raise PuzzleReplayed("this modulus already solved a puzzle: replayed solution")
    if params.construction is Construction.HASH_AND_RANGE:
        x = int.from_bytes(reply.preimage, "big")
        if len(reply.preimage) != (params.preimage_bits + 7) // 8 or x >> params.preimage_bits:
            raise WrongPreimage("the pre-image has the wrong size")
        y = int.from_bytes(challenge.request.value, "big")
        cand = (y | (x << _shift(params))).to_bytes(nbytes, "big")
        if not hmac.compare_digest(hashlib.sha256(cand).digest(), challenge.request.digest):
            raise WrongPreimage("H(x || y) != H(m): wrong hash pre-image")
    elif reply.preimage:
        raise WrongPreimage("a pre-image was sent for the first construction")
    n = int.from_bytes(reply.modulus, "big")
    if abs(n - challenge.m) > (1 << _window(params)) or n % 2 == 0 or len(reply.modulus) != nbytes:
        raise ModulusOutOfRange(f"modulus is not inside [m - 2^{params.k}, m + 2^{params.k}]")
    if reply.e < 3 or reply.e % 2 == 0:
        raise ModulusOutOfRange("invalid public exponent")
    public_key = rsa.RSAPublicNumbers(reply.e, n).public_key()
    if not reply.self_signature:
        raise MissingSelfSignature("the puzzle reply carries no self-signature")
    if verify_signature:
        try:
            public_key.verify(
                reply.self_signature, _signed_message(m_bytes, n, reply.e), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            raise BadSelfSignature("the self-signature does not verify under (n, e)") from None
    if replay_cache is not None:
        replay_cache.add(reply.modulus)
    return public_key


# --- codecs -------------------------------------------------------------------------


def pull_puzzle_request(buf: Buffer) -> PuzzleRequest:
    raw = buf.pull_uint8()
    try:
        construction = Construction(raw)
    except ValueError:
        raise DecodeError(f"unknown puzzle construction {raw}") from None
    n_bits = buf.pull_uint16()
    k = buf.pull_uint16()
    preimage_bits = buf.pull_uint8()
    digest = buf.pull_vector(1)
    value = buf.pull_vector(2, 1)
    buf.expect_end("PuzzleRequest")
    if not MIN_BITS <= n_bits <= MAX_BITS or n_bits % 8 or len(value) != n_bits // 8:
        raise DecodeError("puzzle modulus size is invalid")
    if not 1 <= k < n_bits - 1:
        raise DecodeError("puzzle K is invalid")
    if construction is Construction.RANGE and (preimage_bits or digest):
        raise DecodeError("first-construction puzzle with a hash part")
    if construction is Construction.HASH_AND_RANGE and (not 1 <= preimage_bits <= 32 or len(digest) != 32):
        raise DecodeError("second-construction puzzle needs 1..32 pre-image bits and a SHA-256 digest")
    return PuzzleRequest(construction, n_bits, k, preimage_bits, digest, value)


def push_puzzle_request(msg: PuzzleRequest) -> bytes:
    w = Writer()
    w.push_uint8(msg.construction)
    w.push_uint16(msg.n_bits)
    w.push_uint16(msg.k)
    w.push_uint8(msg.preimage_bits)
    w.push_vector(1, msg.digest)
    w.push_vector(2, msg.value)
    return w.getvalue()


def pull_puzzle_reply(buf: Buffer) -> PuzzleReply:
    preimage = buf.pull_vector(1, 0, 4)
    modulus = buf.pull_vector(2, 1)
    e = buf.pull_uint(4)
    sig = buf.pull_vector(2)
    buf.expect_end("PuzzleReply")
    if modulus[0] == 0:
        raise DecodeError("modulus has a leading zero byte")
    return PuzzleReply(preimage, modulus, e, sig)


def push_puzzle_reply(msg: PuzzleReply) -> bytes:
    w = Writer()
    w.push_vector(1, msg.preimage)
    w.push_vector(2, msg.modulus)
    w.push_uint(msg.e, 4)
    w.push_vector(2, msg.self_signature)
    return w.getvalue()
