"""Probable primes inside a given interval -- the one step of RSA key generation a puzzle changes.

§6 of the paper: "The only modification necessary to solve the client puzzle
is to choose the candidate odd numbers in the specified range.  The rest is
exactly the same as the standard RSA key generation."  OpenSSL's key
generator does not take a range, so the search is written here: trial
division by the primes below 2000, then Miller-Rabin with bases drawn from the
injected RNG (error probability at most 4^-rounds per composite).  Python's
three-argument ``pow`` does the modular exponentiation.

Standard RSA key generation (Table 4) is measured with OpenSSL through
``cryptography``; :func:`random_prime` here is what the *puzzle solver* uses,
and the experiments compare the two so that the cost of doing the search in
Python is visible.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["SMALL_PRIMES", "is_probable_prime", "random_prime", "prime_in_interval"]

Random = Callable[[int], bytes]


def _small_primes(limit: int) -> tuple[int, ...]:
    sieve = bytearray([1]) * limit
    sieve[0:2] = b"\x00\x00"
    for i in range(2, int(limit**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(sieve[i * i :: i]))
    return tuple(i for i, v in enumerate(sieve) if v)


SMALL_PRIMES = _small_primes(2000)


def _rand_below(rng: Random, bound: int) -> int:
    """Uniform integer in [0, bound) from the injected byte source (rejection sampling)."""
    if bound <= 0:
        raise ValueError("bound must be positive")
    nbytes = (bound.bit_length() + 7) // 8 + 1
    limit = (1 << (8 * nbytes)) // bound * bound
    for _ in range(1000):
        v = int.from_bytes(rng(nbytes), "big")
        if v < limit:
            return v % bound
    raise RuntimeError("rng keeps returning out-of-range values")


def is_probable_prime(n: int, rng: Random, rounds: int = 40) -> bool:
    """Trial division, then ``rounds`` Miller-Rabin rounds with random bases."""
    if n < 2:
        return False
    for p in SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for _ in range(rounds):
        a = 2 + _rand_below(rng, n - 3)
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _passes_trial_division(n: int) -> bool:
    return all(n % p for p in SMALL_PRIMES) or n in SMALL_PRIMES


def prime_in_interval(
    lo: int, hi: int, rng: Random, *, e: int = 65537, rounds: int = 40, max_candidates: int = 1 << 20
) -> tuple[int | None, int]:
    """A probable prime q in [lo, hi] with gcd(q - 1, e) = 1, or None; and candidates tried.

    Starts at a random odd point of the interval and walks upward by 2,
    wrapping around once, so every odd number is tried at most once.  Cheap
    trial division rejects most candidates; one Miller-Rabin round filters
    the rest before the full ``rounds``.
    """
    if lo > hi:
        return None, 0
    lo = max(lo, 3)
    first_odd = lo | 1
    if first_odd > hi:
        return None, 0
    count = (hi - first_odd) // 2 + 1
    start = _rand_below(rng, count)
    tried = 0
    for k in range(min(count, max_candidates)):
        cand = first_odd + 2 * ((start + k) % count)
        tried += 1
        if not _passes_trial_division(cand):
            continue
        if math.gcd(cand - 1, e) != 1:
            continue
        if is_probable_prime(cand, rng, 1) and is_probable_prime(cand, rng, rounds):
            return cand, tried
    return None, tried


def random_prime(bits: int, rng: Random, *, e: int = 65537, rounds: int = 40) -> int:
    """A random probable prime of exactly ``bits`` bits with its two top bits set (as OpenSSL does)."""
    if bits < 16:
        raise ValueError("bits must be at least 16")
    for _ in range(1000):
        lo = (3 << (bits - 2)) + _rand_below(rng, 1 << (bits - 2))
        hi = min(lo + 64 * bits, (1 << bits) - 1)
        q, _ = prime_in_interval(lo, hi, rng, e=e, rounds=rounds)
        if q is not None:
            return q
    raise RuntimeError("no prime found (is the rng broken?)")
