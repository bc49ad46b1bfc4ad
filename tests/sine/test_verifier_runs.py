"""StreamVerifier with runs of records in one call: the same events and errors as record by record.

:meth:`StreamVerifier._run` hands every run of whole records before a chain's last one to
:func:`sine.chaincrypto.verify_run`.  The oracle is the same verifier with ``_run`` switched
off, i.e. the record-by-record path (hashlib, one record per step) the verifier had before
runs existed.  Hypothesis draws documents (with and without a Forward Authenticator, inline
and separate form, every hash), tampers with one byte at a random position, cuts the stream
short and splits it at random points; the C backend, the Python twin and the oracle must
return the same events from every call and fail at the same block with the same typed error
carrying the same events.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sine.verifier
from sine.algorithms import HashAlg, SigningKey
from sine.errors import RemoteProtocolError
from sine.format import ForwardAuthenticator, push_separate_tag
from sine.tag import encode_stream, sign_document
from sine.verifier import BlockVerified, StreamVerifier, _block_events
from tests.sine.chain_backends import backend_function

NOW = 1_700_000_000.0
MODES = ("c", "python", "per-record")


def per_record(self: StreamVerifier, view: memoryview, pos: int) -> int:
    return pos  # no run: every record goes through _one_record


def outcome(mode: str, make: Any, pieces: list[bytes]) -> list[Any]:
    """Everything observable: the events of each call, then the error (type, message, block,
    events) or the events of the end of the stream."""
    with pytest.MonkeyPatch.context() as mp:
        if mode == "per-record":
            mp.setattr(StreamVerifier, "_run", per_record)
        else:
            mp.setattr(sine.verifier, "verify_run", backend_function(mode))
        seen: list[Any] = []
        try:
            v = make()
            for piece in pieces:
                seen.append(v.receive_data(piece))
            seen.append(v.receive_data(b""))
            seen.append((v.blocks_verified, v.released_bytes, v.state))
        except RemoteProtocolError as exc:
            seen.append((type(exc), str(exc), exc.block, exc.events))
        return seen


def split(body: bytes, cuts: list[int]) -> Iterator[bytes]:
    edges = [0, *sorted(c % (len(body) + 1) for c in cuts), len(body)]
    for a, b in zip(edges, edges[1:], strict=False):
        if b > a:
            yield body[a:b]


#: The streams the verifier's properties draw (here and ``test_verifier_coalesce.py``).
STREAM_CASES = {
    "size": st.integers(0, 3000), "bs": st.sampled_from([16, 64, 100, 1024]),
    "alg": st.sampled_from(list(HashAlg)), "with_fa": st.booleans(), "separate": st.booleans(),
    "tamper": st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(1, 255))),
    "cut": st.integers(0, 40), "cuts": st.lists(st.integers(0, 10**6), max_size=8),
    "digest_trust": st.booleans(),
}
stream_examples = settings(max_examples=250, deadline=None,
                           suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                  HealthCheck.too_slow])  # fmt: skip


def drawn_stream(ed_key: SigningKey, size: int, bs: int, alg: HashAlg, with_fa: bool,
                 separate: bool, tamper: tuple[int, int] | None, cut: int, cuts: list[int],
                 digest_trust: bool) -> tuple[dict[str, Any], list[bytes]]:  # fmt: skip
    """A signed document as a verifier receives it (one of :data:`STREAM_CASES`): the
    verifier's trust keywords (its anchor, and the tag when it travels apart) and the pieces
    of the body, one byte tampered with and its end cut off as drawn."""
    doc = bytes((i * 31 + i // 7) % 256 for i in range(size))
    fa = (ForwardAuthenticator(tuple((f"/p{i}", bytes([i]) * 32) for i in range(5)))
          if with_fa else None)
    signed = sign_document(doc, "/d", ed_key, NOW, block_size=bs, hash_alg=alg,
                           forward_authenticator=fa)
    anchor: dict[str, Any] = ({"trusted_digest": signed.info.at_sign()} if digest_trust
                              else {"public_key": ed_key.verifying_key()})
    if separate:
        anchor["separate"] = push_separate_tag(signed.separate_tag())
        body = bytearray(doc)
    else:
        body = bytearray(b"".join(encode_stream(doc, signed)))
    if tamper is not None and body:
        body[tamper[0] % len(body)] ^= tamper[1]
    body = body[: max(len(body) - cut, 0)] if cut % 3 == 0 else body
    return anchor, list(split(bytes(body), cuts))


@stream_examples
@given(**STREAM_CASES)
def test_runs_change_nothing_observable(ed_key: SigningKey, **case: Any) -> None:
    anchor, pieces = drawn_stream(ed_key, **case)

    def make() -> StreamVerifier:
        return StreamVerifier("/d", NOW, **anchor)

    results = {mode: outcome(mode, make, pieces) for mode in MODES}
    assert results["c"] == results["per-record"]
    assert results["python"] == results["per-record"]


def test_block_events_equal_the_constructor() -> None:
    blocks = [bytes([i]) * 40 for i in range(5)]
    events = _block_events(7, blocks)
    want = [BlockVerified(7 + i, b) for i, b in enumerate(blocks)]
    assert events == want
    assert [type(e) for e in events] == [BlockVerified] * 5
    assert [repr(e) for e in events] == [repr(e) for e in want]
    assert [hash(e) for e in events] == [hash(e) for e in want]
    assert _block_events(1, []) == []
    assert not hasattr(BlockVerified, "__post_init__")
    with pytest.raises(AttributeError):
        events[0].index = 3  # type: ignore[misc]  # still frozen
