"""The chain-run verifier: the C extension against its pure-Python twin, result for result.

The chains here are built in this file from :mod:`hashlib` (``h_i = H(B_i || h_{i+1})``),
never from the code under test.  Hypothesis draws chains, tampering at random positions and
random split points of the input; both backends must return the same blocks, the same
trusted value and the same mismatch flag at every step, and the blocks they release must be
exactly the chain's blocks before the first tampered record.
"""

from __future__ import annotations

import array
import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sine import chaincrypto
from sine.chaincrypto import BACKEND, GIL_RELEASE_BYTES, c_verify_run, py_verify_run

REPO = Path(__file__).resolve().parents[2]
HLEN = {"sha256": 32, "sha384": 48, "sha512": 64}
Run = Callable[..., tuple[list[bytes], bytes, bool]]

if c_verify_run is None and os.environ.get("SINE_PURE_PYTHON") != "1":
    pytest.fail("sine._chaincrypto is not built: run `make build` (or set SINE_PURE_PYTHON=1)",
                pytrace=False)

IMPLS: dict[str, Run] = {"python": py_verify_run}
if c_verify_run is not None:
    IMPLS["c"] = c_verify_run


def chain(blocks: list[bytes], hash_name: str, end: bytes) -> list[bytes]:
    """``[h_1, ..., h_{k+1}]`` for ``blocks`` with ``h_{k+1} = end`` (a run is mid-chain)."""
    links = [end]
    for block in reversed(blocks):
        links.append(hashlib.new(hash_name, block + links[-1]).digest())
    return links[::-1]


def inline(blocks: list[bytes], links: list[bytes]) -> bytes:
    """Records ``B_i || h_{i+1}`` as in a ``Content-Encoding: sine`` body."""
    return b"".join(b + h for b, h in zip(blocks, links[1:], strict=True))


def both(*args: Any) -> tuple[list[bytes], bytes, bool]:
    """Every backend's result for ``args``; they must agree (and the result is returned)."""
    results = {name: run(*args) for name, run in IMPLS.items()}
    first = results["python"]
    for name, got in results.items():
        assert got == first, (name, args[:3])
        assert all(type(b) is bytes for b in got[0]) and type(got[1]) is bytes
    return first


def errors(*args: Any) -> tuple[type[BaseException], str]:
    """The error every backend raises for ``args``; they must agree on type and message."""
    seen = set()
    for run in IMPLS.values():
        with pytest.raises((TypeError, ValueError, BufferError)) as info:
            run(*args)
        seen.add((info.type, str(info.value)))
    assert len(seen) == 1, seen
    return seen.pop()


def test_backend_is_c_when_built() -> None:
    if os.environ.get("SINE_PURE_PYTHON") == "1":
        assert BACKEND == "python" and chaincrypto.verify_run is py_verify_run
    else:
        assert BACKEND == "c" and chaincrypto.verify_run is c_verify_run


def test_constants_agree() -> None:
    if c_verify_run is not None:
        from sine import _chaincrypto, _chaincrypto_py

        for name in ("MIN_BLOCK_SIZE", "MAX_BLOCK_SIZE", "GIL_RELEASE_BYTES"):
            assert getattr(_chaincrypto, name) == getattr(_chaincrypto_py, name), name


def test_pure_python_switch_in_a_fresh_interpreter() -> None:
    code = "from sine import chaincrypto as c; print(c.BACKEND, c.verify_run is c.py_verify_run)"
    for value, want in (("1", "python True"), ("", "c False" if c_verify_run else "python True")):
        env = dict(os.environ, SINE_PURE_PYTHON=value)
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True,
                             capture_output=True, text=True).stdout
        assert out.split() == want.split()


@pytest.mark.parametrize("hash_name", list(HLEN))
def test_whole_run_verifies_and_hands_over_the_last_link(hash_name: str) -> None:
    blocks = [bytes([i]) * 64 for i in range(10)]
    links = chain(blocks, hash_name, b"\x07" * HLEN[hash_name])
    got, trusted, mismatch = both(hash_name, 64, links[0], inline(blocks, links), 10**40)
    assert (got, trusted, mismatch) == (blocks, links[-1], False)
    got, trusted, mismatch = both(hash_name, 64, links[0], b"".join(blocks), 99,
                                  b"".join(links[1:]))
    assert (got, trusted, mismatch) == (blocks, links[-1], False)


def test_limits_partial_records_and_mismatch_index() -> None:
    blocks = [bytes([i]) * 16 for i in range(8)]
    links = chain(blocks, "sha256", bytes(32))
    body = inline(blocks, links)
    assert both("sha256", 16, links[0], body, 3) == (blocks[:3], links[3], False)
    assert both("sha256", 16, links[0], body, 0) == ([], links[0], False)
    assert both("sha256", 16, links[0], body[:-1], 99) == (blocks[:7], links[7], False)
    assert both("sha256", 16, links[0], b"", 99) == ([], links[0], False)
    bad = bytearray(body)
    bad[5 * 48 + 47] ^= 0x80  # the last byte of record 5's link: record 5 no longer hashes
    assert both("sha256", 16, links[0], bad, 99) == (blocks[:5], links[5], True)
    assert both("sha256", 16, links[0], bad, 5) == (blocks[:5], links[5], False)
    assert both("sha256", 16, links[1], body, 99) == ([], links[1], True)  # wrong start
    for k in range(32):  # a digest that differs in any one byte (every byte is compared)
        wrong = bytearray(links[0])
        wrong[k] ^= 1
        assert both("sha256", 16, bytes(wrong), body, 99) == ([], bytes(wrong), True), k
    # separate form: the run also ends with the links
    assert both("sha256", 16, links[0], b"".join(blocks), 99, b"".join(links[1:4])) == (
        blocks[:3], links[3], False)


def test_buffer_types_are_read_as_bytes() -> None:
    blocks = [bytes(range(i, i + 32)) for i in range(6)]
    links = chain(blocks, "sha256", bytes(32))
    body = inline(blocks, links)
    want = (blocks, links[-1], False)
    for data in (body, bytearray(body), memoryview(body), memoryview(b"xx" + body)[2:],
                 array.array("B", body)):
        assert both("sha256", 32, links[0], data, 99) == want
    assert both("sha256", 32, links[0], memoryview(b"".join(blocks)), 99,
                bytearray(b"".join(links[1:]))) == want
    wide = array.array("I", body[: len(body) // 4 * 4])  # 4-byte items: still read bytewise
    assert both("sha256", 32, links[0], wide, 99)[0] == blocks[: len(wide) * 4 // 64]


def test_argument_errors_are_identical() -> None:
    ok = bytes(32)
    cases: list[tuple[Any, ...]] = [
        ("md5", 16, ok, b"", 1),
        (b"sha256", 16, ok, b"", 1),
        ("sha256", 15, ok, b"", 1),
        ("sha256", (1 << 20) + 1, ok, b"", 1),
        ("sha256", -1, ok, b"", 1),
        ("sha256", 16.0, ok, b"", 1),
        ("sha256", 16, ok[:31], b"", 1),
        ("sha256", 16, bytes(48), b"", 1),
        ("sha256", 16, bytearray(ok), b"", 1),
        ("sha256", 16, ok, "text", 1),
        ("sha256", 16, ok, None, 1),
        ("sha256", 16, ok, memoryview(bytes(64))[::2], 1),
        ("sha256", 16, ok, b"", -1),
        ("sha256", 16, ok, b"", -(10**30)),
        ("sha256", 16, ok, b"", "1"),
        ("sha256", 16, ok, b"", 1, "links"),
        ("sha256", 16, ok, b"", 1, 7),
    ]
    for args in cases:
        errors(*args)
    for name, run in IMPLS.items():
        with pytest.raises(TypeError):
            run("sha256", 16, ok, b"")  # too few
        with pytest.raises(TypeError):
            run("sha256", 16, ok, b"", 1, None, None)  # too many
        assert run("sha256", 16, ok, b"", 10**30, None) == ([], ok, False), name
        assert run("sha256", True + 15, ok, b"", True) == ([], ok, False), name


@st.composite
def tampered_runs(draw: st.DrawFn) -> dict[str, Any]:
    hash_name = draw(st.sampled_from(list(HLEN)))
    hlen = HLEN[hash_name]
    bs = draw(st.sampled_from([16, 17, 31, 64, 100, 257]))
    n = draw(st.integers(0, 12))
    blocks = [draw(st.binary(min_size=bs, max_size=bs)) for _ in range(n)]
    links = chain(blocks, hash_name, draw(st.binary(min_size=hlen, max_size=hlen)))
    separate = draw(st.booleans())
    data = bytearray(b"".join(blocks) if separate else inline(blocks, links))
    link_bytes = bytearray(b"".join(links[1:]))
    data += draw(st.binary(max_size=bs + hlen - 1))  # a partial record (or junk) at the end
    where = draw(st.sampled_from(["none", "data", "links"] if separate else ["none", "data"]))
    target = data if where == "data" else link_bytes
    bad = None
    if where != "none" and target:
        pos = draw(st.integers(0, len(target) - 1))
        target[pos] ^= draw(st.integers(1, 255))
        bad = pos // (bs if where == "data" and separate else hlen if separate else bs + hlen)
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=6)))
    return {"hash_name": hash_name, "bs": bs, "blocks": blocks, "links": links,
            "data": bytes(data), "link_bytes": bytes(link_bytes) if separate else None,
            "bad": bad, "cuts": cuts, "max_records": draw(st.integers(0, n + 2))}


@settings(max_examples=400, deadline=None)
@given(case=tampered_runs())
def test_twins_agree_on_tampered_chains_fed_at_random_split_points(case: dict[str, Any]) -> None:
    """Feed the bytes in pieces as a stream verifier would (keeping any partial record);
    every backend returns the same result at every step, the released blocks are the chain's
    blocks in order, and the first mismatch is the first tampered record."""
    hash_name, bs, blocks, links = case["hash_name"], case["bs"], case["blocks"], case["links"]
    data, link_bytes, bad = case["data"], case["link_bytes"], case["bad"]
    hlen = HLEN[hash_name]
    size = bs if link_bytes is not None else bs + hlen
    released: list[bytes] = []
    trusted, pending, mismatch = links[0], b"", False
    edges = [0, *case["cuts"], len(data)]
    for start, stop in zip(edges, edges[1:], strict=False):
        pending += data[start:stop]
        left = case["max_records"] - len(released)
        extra = () if link_bytes is None else (link_bytes[len(released) * hlen :],)
        got, trusted, mismatch = both(hash_name, bs, trusted, pending, left, *extra)
        released += got
        pending = pending[len(got) * size :]
        if mismatch:
            break
    assert released == blocks[: len(released)]
    assert trusted == links[len(released)]
    limit = min(case["max_records"], len(blocks))
    if bad is not None and bad < limit:
        assert mismatch and len(released) == bad
    else:
        assert not mismatch and len(released) == limit


def test_long_runs_release_the_gil_and_stay_exact() -> None:
    """Runs above GIL_RELEASE_BYTES from several threads at once give the twin's result."""
    assert c_verify_run is not None
    bs = 1024
    count = 3 * GIL_RELEASE_BYTES // bs
    blocks = [i.to_bytes(4, "big") * (bs // 4) for i in range(count)]
    links = chain(blocks, "sha256", bytes(32))
    body = bytearray(inline(blocks, links))
    body[(count - 3) * (bs + 32) + 9] ^= 1
    want = py_verify_run("sha256", bs, links[0], body, count)
    assert want == (blocks[: count - 3], links[count - 3], True)
    results: list[object] = []

    def work() -> None:
        for _ in range(5):
            results.append(c_verify_run("sha256", bs, links[0], body, count))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 20


@contextmanager
def scribbled_chain(bs: int = 1024) -> Iterator[tuple[list[bytes], list[bytes], bytearray]]:
    """A chain long enough for a GIL-free run (blocks, links, the inline body), its body
    rewritten byte by byte by another thread for as long as the block lasts."""
    count = 4 * GIL_RELEASE_BYTES // bs
    blocks = [i.to_bytes(4, "big") * (bs // 4) for i in range(count)]
    links = chain(blocks, "sha256", bytes(32))
    body = bytearray(inline(blocks, links))
    stop = threading.Event()

    def scribble() -> None:
        i = 0
        while not stop.is_set():
            body[(i * 7919) % len(body)] ^= 0xFF
            i += 1

    writer = threading.Thread(target=scribble)
    writer.start()
    try:
        yield blocks, links, body
    finally:
        stop.set()
        writer.join()


def test_released_blocks_are_the_checked_bytes_while_another_thread_writes() -> None:
    """A buffer rewritten during a GIL-free run: whatever comes back must chain correctly
    (each block is hashed from the copy that is returned, never re-read)."""
    assert c_verify_run is not None
    with scribbled_chain() as (blocks, links, body):
        for _ in range(20):
            got, trusted, _ = c_verify_run("sha256", 1024, links[0], body, len(blocks))
            assert got == blocks[: len(got)] and trusted == links[len(got)]
