"""``StreamVerifier(coalesce=True)``: one :class:`RunVerified` per run, nothing else changes.

The oracle is the default verifier (one :class:`BlockVerified` per block; itself held to the
record-by-record path by ``tests/sine/test_verifier_runs.py``).  Hypothesis draws documents
(with and without a Forward Authenticator, inline and separate form, every hash, both trust
anchors), tampers with one byte, cuts the stream short and splits it at random points; with
either backend of :func:`sine.chaincrypto.verify_run_joined`, every call's coalesced events,
cut back into blocks, must be the oracle's events of that call, and every error the same
type, message and block with the same events on it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

import sine.verifier
from sine.algorithms import SigningKey
from sine.chaincrypto import c_verify_run_joined, py_verify_run_joined
from sine.errors import BlockMismatch, RemoteProtocolError
from sine.tag import encode_stream, sign_document
from sine.verifier import BlockVerified, Event, RunVerified, StreamVerifier
from tests.sine.test_verifier_runs import STREAM_CASES, drawn_stream, stream_examples

NOW = 1_700_000_000.0
JOINED = {"python": py_verify_run_joined, "c": c_verify_run_joined}


def per_block(events: list[Any], bs: int) -> list[Event]:
    """Coalesced events with each :class:`RunVerified` cut into its blocks' events."""
    out: list[Event] = []
    for e in events:
        assert not isinstance(e, BlockVerified)
        if isinstance(e, RunVerified):
            count = e.last - e.first + 1
            assert count >= 1 and bs * (count - 1) < len(e.data) <= bs * count
            out += [BlockVerified(e.first + k, e.data[k * bs : (k + 1) * bs])
                    for k in range(count)]
        else:
            out.append(e)
    return out


def outcome(make: Any, pieces: list[bytes], bs: int, coalesce: bool) -> list[Any]:
    seen: list[Any] = []
    try:
        v = make(coalesce)
        for piece in [*pieces, b""]:
            events = v.receive_data(piece)
            seen.append(per_block(events, bs) if coalesce else events)
        seen.append((v.blocks_verified, v.released_bytes, v.state))
    except RemoteProtocolError as exc:
        events = per_block(exc.events, bs) if coalesce else exc.events
        seen.append((type(exc), str(exc), exc.block, events))
    return seen


@stream_examples
@given(**STREAM_CASES)
def test_coalesced_events_are_the_blocks_events(ed_key: SigningKey, **case: Any) -> None:
    bs = case["bs"]
    anchor, pieces = drawn_stream(ed_key, **case)

    def make(coalesce: bool) -> StreamVerifier:
        return StreamVerifier("/d", NOW, coalesce=coalesce, **anchor)

    want = outcome(make, pieces, bs, False)
    for name, fn in JOINED.items():
        assert fn is not None, "sine._chaincrypto is not built: run `make build`"
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sine.verifier, "verify_run_joined", fn)
            assert outcome(make, pieces, bs, True) == want, name


def test_one_event_per_run_and_a_failure_names_the_block(ed_key: SigningKey) -> None:
    bs, chunk = 1024, 64 * 1024
    doc = bytes(range(256)) * 1024  # 256 blocks
    signed = sign_document(doc, "/d", ed_key, NOW, block_size=bs)
    body = bytearray(b"".join(encode_stream(doc, signed)))
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key(), coalesce=True)
    runs = [v.receive_data(body[i : i + chunk]) for i in range(0, len(body), chunk)]
    runs.append(v.receive_data(b""))
    data = [e for events in runs for e in events if isinstance(e, RunVerified)]
    assert b"".join(e.data for e in data) == doc
    assert max(sum(isinstance(e, RunVerified) for e in events) for events in runs) <= 3
    assert [(e.first, e.last) for e in data] == [
        (a.last + 1 if a else 1, b.last) for a, b in zip([None, *data], data, strict=False)]
    tag_len = len(body) - len(doc) - (signed.info.block_count - 1) * 32
    body[tag_len + 150 * (bs + 32) + 7] ^= 1  # block 151
    v = StreamVerifier("/d", NOW, public_key=ed_key.verifying_key(), coalesce=True)
    got = bytearray()
    with pytest.raises(BlockMismatch) as exc:
        for i in range(0, len(body), chunk):
            got += b"".join(e.data for e in v.receive_data(body[i : i + chunk])
                            if isinstance(e, RunVerified))
    assert exc.value.block == 151
    got += b"".join(e.data for e in exc.value.events if isinstance(e, RunVerified))
    assert got == doc[: 150 * bs]
