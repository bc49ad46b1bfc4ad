"""Client puzzles: both constructions solve and verify; every refusal of Figure 3 is typed."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from reverse_ssl import primes
from reverse_ssl.errors import (
    BadSelfSignature,
    MissingSelfSignature,
    ModulusOutOfRange,
    PuzzleReplayed,
    WrongPreimage,
)
from reverse_ssl.puzzle import (
    PAPER_K,
    Construction,
    PuzzleParams,
    ReplayCache,
    SolvedPuzzle,
    expected_primes_per_attempt,
    make_puzzle,
    min_feasible_k,
    solve,
    verify_reply,
)
from tls12.testing import seeded_rng

FIRST = PuzzleParams(Construction.RANGE, n_bits=512)
SECOND = PuzzleParams(Construction.HASH_AND_RANGE, n_bits=512, preimage_bits=8)


@functools.cache
def solved(params: PuzzleParams, seed: bytes = b"s") -> tuple[object, SolvedPuzzle]:
    challenge = make_puzzle(params, seeded_rng(b"server" + seed))
    return challenge, solve(challenge.request, seeded_rng(b"client" + seed))


@pytest.mark.parametrize("params", [FIRST, SECOND], ids=["first", "second"])
def test_solution_is_in_the_window_and_verifies(params: PuzzleParams) -> None:
    challenge, sol = solved(params)
    n = int.from_bytes(sol.reply.modulus, "big")
    assert abs(n - challenge.m) <= 1 << params.k
    assert n.bit_length() == params.n_bits
    assert sol.private_key.private_numbers().public_numbers.n == n
    key = verify_reply(challenge, sol.reply, replay_cache=ReplayCache())
    assert key.public_numbers().n == n
    if params.construction is Construction.HASH_AND_RANGE:
        assert 1 <= sol.hashes_tried <= 256


def test_modulus_outside_window_is_refused() -> None:
    challenge, sol = solved(FIRST)
    n = int.from_bytes(sol.reply.modulus, "big") + (2 << FIRST.k)
    bad = dataclasses.replace(sol.reply, modulus=n.to_bytes(64, "big"))
    with pytest.raises(ModulusOutOfRange):
        verify_reply(challenge, bad)


def test_solution_of_another_puzzle_is_out_of_range() -> None:
    challenge, _ = solved(FIRST, b"a")
    _, other = solved(FIRST, b"b")
    with pytest.raises(ModulusOutOfRange):
        verify_reply(challenge, other.reply)


def test_missing_and_invalid_self_signature() -> None:
    challenge, sol = solved(FIRST)
    with pytest.raises(MissingSelfSignature):
        verify_reply(challenge, dataclasses.replace(sol.reply, self_signature=b""))
    forged = bytes([sol.reply.self_signature[0] ^ 1]) + sol.reply.self_signature[1:]
    with pytest.raises(BadSelfSignature):
        verify_reply(challenge, dataclasses.replace(sol.reply, self_signature=forged))
    # the server may skip step 4 (a pre-signed one-time key is ready): then the key is accepted
    verify_reply(challenge, dataclasses.replace(sol.reply, self_signature=forged), verify_signature=False)


def test_wrong_preimage_is_refused_before_anything_else() -> None:
    challenge, sol = solved(SECOND)
    x = int.from_bytes(sol.reply.preimage, "big")
    wrong = dataclasses.replace(sol.reply, preimage=((x + 1) % 256).to_bytes(1, "big"), modulus=b"\x01" * 64)
    with pytest.raises(WrongPreimage):
        verify_reply(challenge, wrong)
    with pytest.raises(WrongPreimage):
        verify_reply(challenge, dataclasses.replace(sol.reply, preimage=b"\x00\x01"))


def test_replayed_solution_is_refused() -> None:
    challenge, sol = solved(FIRST)
    cache = ReplayCache()
    verify_reply(challenge, sol.reply, replay_cache=cache)
    with pytest.raises(PuzzleReplayed):
        verify_reply(challenge, sol.reply, replay_cache=cache)


def test_replay_cache_is_bounded() -> None:
    cache = ReplayCache(capacity=2)
    for n in (b"a", b"b", b"c"):
        cache.add(n)
    assert b"a" not in cache and b"b" in cache and b"c" in cache


def test_paper_k_is_infeasible_for_balanced_1024_bit_moduli() -> None:
    assert expected_primes_per_attempt(1024, PAPER_K) < 1e-100
    assert 512 < min_feasible_k(1024) < 530
    with pytest.raises(ValueError, match="infeasible"):
        PuzzleParams(n_bits=1024, k=PAPER_K)


def test_smaller_k_needs_more_attempts_at_p() -> None:
    """Near the feasibility threshold the window for q is often empty: the solver redraws p."""
    tight = PuzzleParams(n_bits=512, k=min_feasible_k(512))
    attempts = [solve(make_puzzle(tight, seeded_rng(bytes([i]))).request, seeded_rng(b"c" + bytes([i]))).p_attempts
                for i in range(3)]
    loose = [solved(FIRST, bytes([i]))[1].p_attempts for i in range(3)]
    assert sum(attempts) > sum(loose)


def test_invalid_params_fail_at_construction() -> None:
    for kwargs in (
        {"n_bits": 500},
        {"n_bits": 512, "preimage_bits": 4},
        {"construction": Construction.HASH_AND_RANGE, "n_bits": 512, "preimage_bits": 0},
        {"n_bits": 512, "e": 4},
    ):
        with pytest.raises(ValueError):
            PuzzleParams(**kwargs)  # type: ignore[arg-type]


def test_prime_search_matches_trial_division() -> None:
    rng = seeded_rng(b"p")
    small = [n for n in range(3, 3000) if primes.is_probable_prime(n, rng)]
    assert small == [p for p in primes.SMALL_PRIMES if 3 <= p < 3000] + [
        n for n in range(2000, 3000) if all(n % d for d in range(2, int(n**0.5) + 1))
    ]
    q, tried = primes.prime_in_interval(1000, 1010, rng, e=5)
    assert q == 1009 and tried >= 1
    assert primes.prime_in_interval(1000, 1010, rng, e=3)[0] is None  # 3 divides 1008
    assert primes.prime_in_interval(24, 28, rng) == (None, 2)
    p = primes.random_prime(128, rng)
    assert p.bit_length() == 128 and p >> 126 == 3
