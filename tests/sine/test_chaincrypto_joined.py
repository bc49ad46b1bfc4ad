"""``verify_run_joined``: the same checks as ``verify_run``, the blocks joined into one bytes.

For every input, each backend's joined result must be the list result of the Python twin
with its blocks joined (``tests/sine/test_chaincrypto.py`` holds the list results of the two
backends to each other), and errors must be the same type with the same message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings

from sine import chaincrypto
from sine.chaincrypto import (
    c_verify_run_joined,
    py_verify_run,
    py_verify_run_joined,
)
from tests.sine.test_chaincrypto import chain, inline, scribbled_chain, tampered_runs

JOINED: dict[str, Callable[..., tuple[bytes, bytes, bool]]] = {"python": py_verify_run_joined}
if c_verify_run_joined is not None:
    JOINED["c"] = c_verify_run_joined


def joined_agree(*args: Any) -> tuple[bytes, bytes, bool]:
    """The list result of the twin, joined; every joined backend must return it."""
    blocks, trusted, mismatch = py_verify_run(*args)
    want = (b"".join(blocks), trusted, mismatch)
    for name, run in JOINED.items():
        assert run(*args) == want, name
    return want


def test_loader_pairs_the_joined_function_with_the_backend() -> None:
    want = c_verify_run_joined if chaincrypto.BACKEND == "c" else py_verify_run_joined
    assert chaincrypto.verify_run_joined is want


@settings(max_examples=300, deadline=None)
@given(case=tampered_runs())
def test_joined_is_the_list_joined(case: dict[str, Any]) -> None:
    hash_name, bs, links = case["hash_name"], case["bs"], case["links"]
    extra = () if case["link_bytes"] is None else (case["link_bytes"],)
    for cut in case["cuts"]:
        joined, _, mismatch = joined_agree(hash_name, bs, links[0], case["data"][:cut],
                                           case["max_records"], *extra)
        assert len(joined) % bs == 0
        assert joined == b"".join(case["blocks"][: len(joined) // bs])
        if mismatch:
            assert len(joined) // bs == case["bad"]


def test_mismatch_at_the_first_record_releases_nothing() -> None:
    blocks = [bytes([i]) * 16 for i in range(4)]
    links = chain(blocks, "sha256", bytes(32))
    body = bytearray(inline(blocks, links))
    assert joined_agree("sha256", 16, links[0], body, 9) == (b"".join(blocks), links[4], False)
    body[3] ^= 1
    assert joined_agree("sha256", 16, links[0], body, 9) == (b"", links[0], True)


def test_argument_errors_are_the_list_functions_errors() -> None:
    ok = bytes(32)
    cases: list[tuple[Any, ...]] = [
        ("md5", 16, ok, b"", 1), ("sha256", 15, ok, b"", 1), ("sha256", 16, ok[:31], b"", 1),
        ("sha256", 16, ok, None, 1), ("sha256", 16, ok, memoryview(bytes(64))[::2], 1),
        ("sha256", 16, ok, b"", -1), ("sha256", 16, ok, b"", "1"),
        ("sha256", 16, ok, b"", 1, 7), ("sha256", 16, ok, b""),
        ("sha256", 16, ok, b"", 1, None, None),
    ]
    for args in cases:
        with pytest.raises(Exception) as want:
            py_verify_run(*args)
        for name, run in JOINED.items():
            with pytest.raises(want.type) as got:
                run(*args)
            if "positional" not in str(got.value):  # arity messages are each function's own
                assert str(got.value) == str(want.value), (name, args)


def test_released_bytes_are_the_checked_bytes_while_another_thread_writes() -> None:
    """A GIL-free joined run over a buffer being rewritten: what comes back must chain."""
    assert c_verify_run_joined is not None
    bs = 1024
    with scribbled_chain(bs) as (blocks, links, body):
        for _ in range(20):
            got, trusted, _ = c_verify_run_joined("sha256", bs, links[0], body, len(blocks))
            done = len(got) // bs
            assert got == b"".join(blocks[:done]) and trusted == links[done]
