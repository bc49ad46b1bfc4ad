"""Record crypto and threads: a large seal or open lets the other threads run, and one cipher
object shared by threads gives what it gives alone.

A server encrypting a 1 MiB segment used to hold the interpreter lock for a millisecond; its
other connections, its keepalive and its cluster link waited that long for every system call
they made. ``seal_many``, ``open_many`` and ``seal_stream`` over :data:`RELEASE_GIL_AT` bytes
run without the lock now, and each object's own lock keeps two threads out of its contexts.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tls12.recordcrypto import PLAINTEXT_MAX, RECORD_CRYPTO_ERRORS, CRecordCipher

RELEASE_GIL_AT = 4 * PLAINTEXT_MAX  # tls12/_recordcrypto.c
KEYS = {"aes-128-cbc": 16, "aes-256-cbc": 32}


@pytest.fixture(autouse=True)
def _c_extension() -> None:
    if CRecordCipher is None:
        pytest.fail("tls12._recordcrypto is not built: run `make build`")


def _cipher(cipher: str = "aes-128-cbc", *, stitched: bool = True) -> Any:
    assert CRecordCipher is not None
    rng = random.Random(cipher)
    return CRecordCipher(cipher, "sha1", rng.randbytes(KEYS[cipher]), rng.randbytes(20),
                         stitched=stitched)


def _records(count: int, seed: int = 1) -> tuple[list[bytes], list[bytes]]:
    rng = random.Random(seed)
    plain = [rng.randbytes(PLAINTEXT_MAX) for _ in range(count - 1)] + [rng.randbytes(1000)]
    return plain, [rng.randbytes(16) for _ in range(count)]


def _ran_during(call: Callable[[], object], tries: int = 30) -> bool:
    """Whether another Python thread kept running while ``call`` (one long C call) ran. A
    thread that holds the interpreter lock through a C call stops every other one: the
    spinner's clock readings then have a gap as long as the call. Without the lock held, the
    gaps stay short, as long as the spinner gets a core (tried again when it did not)."""
    seen: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            seen.append(time.perf_counter())

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        for _ in range(tries):
            seen.clear()
            begun = time.perf_counter()
            call()
            ended = time.perf_counter()
            inside = [begun, *(t for t in seen if begun < t < ended), ended]
            if max(b - a for a, b in itertools.pairwise(inside)) < (ended - begun) / 2:
                return True
    finally:
        stop.set()
        spinner.join()
    return False


@pytest.mark.parametrize("stitched", [True, False], ids=["stitched", "generic"])
def test_a_large_seal_or_open_lets_other_threads_run(stitched: bool) -> None:
    c = _cipher(stitched=stitched)
    plain, ivs = _records(1024)  # 16 MiB: tens of milliseconds
    sealed = c.seal_many(5, 23, 0x0303, plain, ivs)
    assert _ran_during(lambda: c.seal_many(5, 23, 0x0303, plain, ivs))
    assert _ran_during(lambda: c.open_many(5, 23, 0x0303, sealed))
    data = b"".join(plain)
    assert _ran_during(lambda: c.seal_stream(5, 23, 0x0303, data))


@pytest.mark.parametrize("cipher", sorted(KEYS))
@pytest.mark.parametrize("stitched", [True, False], ids=["stitched", "generic"])
def test_one_object_shared_by_threads_gives_what_it_gives_alone(cipher: str, stitched: bool) -> None:
    c = _cipher(cipher, stitched=stitched)
    jobs = [_records(n, seed=n) for n in (5, 8, 13)]  # each over the release threshold
    alone = [c.seal_many(100 * n, 23, 0x0303, *job) for n, job in enumerate(jobs)]
    streams = [b"".join(job[0]) for job in jobs]
    got: list[object] = []

    def work(k: int) -> None:
        for r in range(12):
            n = (k + r) % len(jobs)
            try:
                sealed = c.seal_many(100 * n, 23, 0x0303, *jobs[n])
                opened = c.open_many(100 * n, 23, 0x0303, sealed)
                stream = c.seal_stream(100 * n, 23, 0x0303, streams[n])  # random IVs
                back = c.open_many(100 * n, 23, 0x0303, _fragments(stream))
                got.append((sealed == alone[n], opened == jobs[n][0], back == jobs[n][0]))
            except Exception as exc:  # noqa: BLE001 - reported below
                got.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 48 and all(g == (True, True, True) for g in got), got[:3]


def _fragments(records: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(records):
        length = int.from_bytes(records[pos + 3 : pos + 5], "big")
        out.append(records[pos + 5 : pos + 5 + length])
        pos += 5 + length
    return out


@pytest.mark.parametrize("stitched", [True, False], ids=["stitched", "generic"])
def test_a_bad_record_among_many_fails_them_all_and_the_object_goes_on(stitched: bool) -> None:
    c = _cipher(stitched=stitched)
    plain, ivs = _records(9)
    sealed = c.seal_many(0, 23, 0x0303, plain, ivs)
    for bad in (0, 4, 8):
        tampered = list(sealed)
        tampered[bad] = tampered[bad][:-1] + bytes([tampered[bad][-1] ^ 1])
        with pytest.raises(RECORD_CRYPTO_ERRORS, match="bad record MAC"):
            c.open_many(0, 23, 0x0303, tampered)
        assert c.open_many(0, 23, 0x0303, sealed) == plain  # the object's lock was let go
    with pytest.raises(ValueError, match="explicit_iv"):
        c.seal_many(0, 23, 0x0303, plain, [*ivs[:-1], b"short"])
    assert c.seal_many(0, 23, 0x0303, plain, ivs) == sealed


def test_many_threads_opening_garbage_never_crash() -> None:
    c = _cipher()
    rng = random.Random(3)
    junk = [[rng.randbytes(rng.choice((16, 48, 16400))) for _ in range(6)] for _ in range(20)]
    errors: list[type[BaseException]] = []

    def work() -> None:
        for batch in junk:
            try:
                c.open_many(0, 23, 0x0303, batch)
            except RECORD_CRYPTO_ERRORS as exc:
                errors.append(type(exc))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(errors) == 80
    assert c.open_many(0, 23, 0x0303, c.seal_many(0, 23, 0x0303, [os.urandom(99)], [bytes(16)]))
